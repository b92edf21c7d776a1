"""Secret values masked in free text, in every form a text commonly carries them: as given and
in any case, JSON-escaped, URL-encoded, and base64- or hex-encoded (of the value as given,
upper- or lower-cased), so that a server echoing a header back upper-cased or encoded does not
carry it past us.

A `Redactor` is built once per set of values (the forms of each computed and compiled into one
pattern then) and applied to any number of texts: one regular-expression pass per text, in
time linear in the text whatever the number of values (the pattern is a trie of the forms)."""

import base64
import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

# Encoded forms shorter than this are not masked: a few base64 or hex characters occur in any
# text by chance.
MIN_ENCODED_CHARS = 8


def text_forms(value: str) -> set[str]:
    """The forms of `value` that keep its letters: as given, JSON-escaped (with and without
    `\\uXXXX` escapes, with `\\/`, and escaped twice, as a JSON text held in a JSON string)
    and URL-encoded (`%XX`, with `+` for a space). Matched ignoring case."""
    escaped = json.dumps(value)[1:-1]
    forms = {
        value,
        escaped,
        json.dumps(value, ensure_ascii=False)[1:-1],
        json.dumps(escaped)[1:-1],
        quote(value, safe=""),
        quote(value),
        quote_plus(value, safe=""),
    }
    return forms | {form.replace("/", "\\/") for form in forms}


def encoded_forms(value: str) -> set[str]:
    """The byte encodings of `value`, as given, upper- and lower-cased: hex, and the part of
    its base64 (standard and URL-safe) that does not depend on what comes before or after it,
    at each of the three byte offsets it may start at within a longer encoded text."""
    forms: set[str] = set()
    for variant in {value, value.upper(), value.lower()}:
        data = variant.encode()
        forms.add(data.hex())
        forms.update(_base64_cores(data))
    return {form for form in forms if len(form) >= MIN_ENCODED_CHARS}


def _base64_cores(data: bytes) -> set[str]:
    cores: set[str] = set()
    bits = 8 * len(data)
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data + bytes(2)).decode()
        # The characters whose six bits all come from `data`.
        first, last = -(-8 * offset // 6), (8 * offset + bits) // 6
        core = encoded[first:last]
        cores.add(core)
        cores.add(core.translate(_URL_SAFE))
    return cores


_URL_SAFE = str.maketrans("+/", "-_")


def forms_of(value: str, *, min_chars: int) -> set[str]:
    """Every form of `value` masked (none when it is shorter than `min_chars`), lower-cased
    where that keeps its length (`Redactor` matches them ignoring case)."""
    if len(value) < min_chars:
        return set()
    # Escapes of a letter outside ASCII differ with its case (`%C3%A9`, `%C3%89`).
    forms = encoded_forms(value)
    for variant in {value, value.upper(), value.lower()}:
        forms |= text_forms(variant)
    return {_folded(form) for form in forms if len(form) >= min_chars}


def _folded(form: str) -> str:
    lowered = form.lower()
    return lowered if len(lowered) == len(form) else form


class Redactor:
    """Replaces, in a text, every form (`forms_of`) of the values it was built with by
    `mask`. Immutable and safe to share between threads; build a new one for new values."""

    __slots__ = ("_folded_pattern", "_mask", "_pattern", "_source", "forms")

    def __init__(self, values: Iterable[str], *, mask: str, min_chars: int) -> None:
        forms: set[str] = set()
        for value in values:
            forms |= forms_of(value, min_chars=min_chars)
        self.forms = frozenset(forms)
        self._mask = mask
        self._source = _trie_pattern(forms) if forms else None
        # Texts are matched lower-cased (much faster than the engine's own case folding);
        # one whose lower case changes its length (rare) is matched with a folding pattern,
        # compiled the first time one comes.
        self._pattern = None if self._source is None else re.compile(self._source)
        self._folded_pattern: re.Pattern[str] | None = None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        """`text` with every form of every value replaced by the mask."""
        pattern = self._pattern
        if pattern is None or not text:
            return text
        lowered = text.lower()
        if len(lowered) != len(text):
            if self._folded_pattern is None:
                assert self._source is not None
                self._folded_pattern = re.compile(self._source, re.IGNORECASE)
            return self._folded_pattern.sub(self._mask, text)
        pieces: list[str] = []
        end = 0
        for match in pattern.finditer(lowered):
            pieces.append(text[end : match.start()])
            pieces.append(self._mask)
            end = match.end()
        if not pieces:
            return text
        pieces.append(text[end:])
        return "".join(pieces)

    def value(self, value: Any) -> Any:
        """A JSON-like `value` (dicts, lists, text, numbers) with every string in it, keys
        included, redacted; `value` itself when nothing in it needed to be."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {self(str(key)): self.value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        return value


def _trie_pattern(forms: Iterable[str]) -> str:
    """A regular expression matching any of `forms`, longest first where one is a prefix of
    another: their trie, each chain of single children written as one literal."""
    root: dict[str, Any] = {}
    for form in forms:
        node = root
        for char in form:
            node = node.setdefault(char, {})
        node[""] = {}
    return _branches(root)


def _branches(node: dict[str, Any]) -> str:
    alternatives = []
    for char, child in node.items():
        if not char:
            continue
        run = [re.escape(char)]
        while len(child) == 1 and "" not in child:
            ((char, child),) = child.items()
            run.append(re.escape(char))
        alternatives.append("".join(run) + _branches(child))
    if not alternatives:
        return ""
    body = alternatives[0] if len(alternatives) == 1 else f"(?:{'|'.join(alternatives)})"
    return f"(?:{body})?" if "" in node else body
