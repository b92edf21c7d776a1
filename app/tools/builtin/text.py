"""The text_transform skill: the everyday string operations a model gets wrong by hand (case,
trimming, replacing, splitting and joining, regular expressions, base64 and URL encoding,
counting, slugs, truncation).

Inputs and outputs are capped, and regular expressions run through the `regex` package with a
timeout, off the event loop: a pattern that backtracks without end fails the call instead of
taking the process with it.
"""

import asyncio
import base64
import binascii
import re
import unicodedata
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote

import regex  # type: ignore[import-untyped]

from app.chain import ToolType
from app.tools.base import BaseTool
from app.tools.errors import FieldError, InvalidToolArguments, ToolError
from app.tools.models import (
    NO_RETRY,
    ToolCallContext,
    ToolDefinition,
    ToolOutput,
    ToolVisibilityConfig,
)

TOOL_NAME = "text_transform"
MAX_TEXT_CHARS = 100_000
MAX_OUTPUT_CHARS = 200_000
MAX_PATTERN_CHARS = 1_000
MAX_ARGUMENT_CHARS = 1_000
MAX_ITEMS = 10_000
MAX_MATCHES = 1_000
DEFAULT_REGEX_TIMEOUT_S = 1.0

Operation = Callable[[str, dict[str, Any]], Any]


def _upper(text: str, _: dict[str, Any]) -> str:
    return text.upper()


def _lower(text: str, _: dict[str, Any]) -> str:
    return text.lower()


def _title(text: str, _: dict[str, Any]) -> str:
    # str.title() capitalises after apostrophes ("Don'T"); words are whitespace-separated here.
    return re.sub(r"\S+", lambda m: m[0][:1].upper() + m[0][1:].lower(), text)


def _capitalize(text: str, _: dict[str, Any]) -> str:
    return text[:1].upper() + text[1:]


def _trim(text: str, arguments: dict[str, Any]) -> str:
    return text.strip(arguments.get("characters"))


def _trim_start(text: str, arguments: dict[str, Any]) -> str:
    return text.lstrip(arguments.get("characters"))


def _trim_end(text: str, arguments: dict[str, Any]) -> str:
    return text.rstrip(arguments.get("characters"))


def _collapse_whitespace(text: str, _: dict[str, Any]) -> str:
    return " ".join(text.split())


def _reverse(text: str, _: dict[str, Any]) -> str:
    return text[::-1]


def _count(text: str, _: dict[str, Any]) -> dict[str, int]:
    return {
        "characters": len(text),
        "words": len(text.split()),
        "lines": len(text.splitlines()),
        "bytes": len(text.encode("utf-8", "surrogatepass")),
    }


def _replace(text: str, arguments: dict[str, Any]) -> str:
    find: str = _required(arguments, "find", "replace")
    replacement: str = arguments.get("replacement", "")
    limit: int = arguments.get("count", 0)
    occurrences = text.count(find)
    if limit:
        occurrences = min(occurrences, limit)
    _check_output(len(text) + occurrences * (len(replacement) - len(find)))
    return text.replace(find, replacement, limit or -1)


def _split(text: str, arguments: dict[str, Any]) -> list[str]:
    separator: str | None = arguments.get("separator") or None  # none or "": any whitespace
    max_splits: int = arguments.get("max_splits", -1)
    return text.split(separator, max_splits)


def _join(text: str, arguments: dict[str, Any]) -> str:
    items: list[str] = _required(arguments, "items", "join")
    separator: str = arguments.get("separator", "")
    _check_output(sum(map(len, items)) + len(separator) * max(len(items) - 1, 0))
    return separator.join(items)


def _base64_encode(text: str, _: dict[str, Any]) -> str:
    return base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")


def _base64_decode(text: str, _: dict[str, Any]) -> str:
    compact = "".join(text.split())
    # Either alphabet; padding is optional, as many encoders drop it.
    altchars = b"-_" if "-" in compact or "_" in compact else None
    compact += "=" * (-len(compact) % 4)
    try:
        data = base64.b64decode(compact, altchars=altchars, validate=True)
    except (binascii.Error, ValueError):
        raise _invalid("text", "is not valid base64") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(
            f"the decoded data ({len(data)} bytes) is not UTF-8 text, so it cannot be shown"
        ) from None


def _url_encode(text: str, _: dict[str, Any]) -> str:
    return quote(text, safe="", errors="surrogatepass")


def _url_decode(text: str, _: dict[str, Any]) -> str:
    return unquote(text)


def _slugify(text: str, arguments: dict[str, Any]) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    if (max_length := arguments.get("max_length")) is not None:
        slug = slug[:max_length].rstrip("-")
    return slug


def _truncate(text: str, arguments: dict[str, Any]) -> str:
    max_length: int = _required(arguments, "max_length", "truncate")
    suffix: str = arguments.get("suffix", "…")
    if len(text) <= max_length:
        return text
    if len(suffix) >= max_length:
        return text[:max_length]
    return text[: max_length - len(suffix)].rstrip() + suffix


_PLAIN: dict[str, Operation] = {
    "upper": _upper,
    "lower": _lower,
    "title": _title,
    "capitalize": _capitalize,
    "trim": _trim,
    "trim_start": _trim_start,
    "trim_end": _trim_end,
    "collapse_whitespace": _collapse_whitespace,
    "reverse": _reverse,
    "count": _count,
    "replace": _replace,
    "split": _split,
    "join": _join,
    "base64_encode": _base64_encode,
    "base64_decode": _base64_decode,
    "url_encode": _url_encode,
    "url_decode": _url_decode,
    "slugify": _slugify,
    "truncate": _truncate,
}
_REGEX = ("regex_match", "regex_replace")
OPERATIONS = (*_PLAIN, *_REGEX)


def _definition() -> ToolDefinition:
    text_limit = {"type": "string", "maxLength": MAX_ARGUMENT_CHARS}
    return ToolDefinition(
        name=TOOL_NAME,
        type=ToolType.SKILL,
        description=(
            "Transforms text exactly, instead of by hand. Operations: upper, lower, title, "
            "capitalize; trim, trim_start, trim_end (whitespace, or `characters`); "
            "collapse_whitespace; reverse; count (characters, words, lines, bytes); replace "
            "(`find` → `replacement`, `count` at most); split (by `separator`, default "
            "whitespace; `max_splits`); join (`items` with `separator`); regex_match (every "
            "match of `pattern` with its groups); regex_replace (`pattern` → `replacement`, "
            "which may use \\1 or \\g<name>; `count` at most); base64_encode, base64_decode; "
            "url_encode, url_decode (percent-encoding); slugify (`max_length`); truncate "
            "(to `max_length` characters, ending with `suffix`, default '…'). Regular "
            "expressions use Python syntax; `ignore_case` applies to them."
        ),
        parameters={
            "type": "object",
            "properties": {
                "operation": {"type": "string", "enum": list(OPERATIONS)},
                "text": {
                    "type": "string",
                    "maxLength": MAX_TEXT_CHARS,
                    "description": "The text to transform (every operation but join).",
                },
                "find": {**text_limit, "minLength": 1, "description": "replace: what to find."},
                "replacement": {
                    **text_limit,
                    "description": "replace, regex_replace: what to put instead (default '').",
                },
                "pattern": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_PATTERN_CHARS,
                    "description": "regex_match, regex_replace: a regular expression.",
                },
                "ignore_case": {"type": "boolean", "default": False},
                "count": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "replace, regex_replace: at most this many (0: all).",
                },
                "separator": {"type": "string", "maxLength": 100},
                "max_splits": {"type": "integer", "minimum": -1, "maximum": MAX_ITEMS},
                "items": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": MAX_TEXT_CHARS},
                    "maxItems": MAX_ITEMS,
                    "description": "join: the strings to join.",
                },
                "characters": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 100,
                    "description": "trim: the characters to remove instead of whitespace.",
                },
                "max_length": {"type": "integer", "minimum": 1, "maximum": MAX_TEXT_CHARS},
                "suffix": {"type": "string", "maxLength": 20},
            },
            "required": ["operation"],
            "additionalProperties": False,
        },
        returns_description="An object with the operation and its `result` (text, a list for "
        "split and regex_match, counts for count).",
        timeout_s=10,
        retry=NO_RETRY,
        idempotent=True,
        visibility=ToolVisibilityConfig(summary_template="text_transform: {operation}"),
    )


class TextTransformTool(BaseTool):
    """String operations with limits; `regex_timeout_s` bounds one regular-expression call."""

    def __init__(self, *, regex_timeout_s: float = DEFAULT_REGEX_TIMEOUT_S) -> None:
        self._regex_timeout_s = regex_timeout_s
        self._definition = _definition()

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        operation: str = arguments["operation"]
        text: str = arguments.get("text", "")
        if "text" not in arguments and operation != "join":
            raise _invalid("text", f"is required for {operation}")
        value: dict[str, Any] = {"operation": operation}
        if operation in _REGEX:
            value.update(await asyncio.to_thread(self._regex, operation, text, arguments))
        else:
            value["result"] = _PLAIN[operation](text, arguments)
        result = value["result"]
        if isinstance(result, str):
            _check_output(len(result))
        return ToolOutput(value)

    def _regex(self, operation: str, text: str, arguments: dict[str, Any]) -> dict[str, Any]:
        flags = regex.IGNORECASE if arguments.get("ignore_case") else 0
        try:
            pattern = regex.compile(_required(arguments, "pattern", operation), flags)
        except (regex.error, ValueError, OverflowError) as exc:
            raise _invalid("pattern", f"is not a valid regular expression: {exc}") from None
        options = {"timeout": self._regex_timeout_s, "concurrent": True}
        try:
            if operation == "regex_match":
                return _matches(pattern, text, options)
            return {"result": _substitute(pattern, text, arguments, options)}
        except TimeoutError:
            raise ToolError(
                f"the pattern took longer than {self._regex_timeout_s:g} s on this text; "
                "simplify it (nested repetition such as (a+)+ backtracks without end)"
            ) from None


def _matches(pattern: Any, text: str, options: dict[str, Any]) -> dict[str, Any]:
    found: list[dict[str, Any]] = []
    truncated = False
    for match in pattern.finditer(text, **options):
        if len(found) == MAX_MATCHES:
            truncated = True
            break
        found.append(
            {
                "match": match[0],
                "start": match.start(),
                "end": match.end(),
                "groups": list(match.groups()),
                "named": match.groupdict(),
            }
        )
    value: dict[str, Any] = {"result": found, "count": len(found)}
    if truncated:
        value["truncated"] = True
    return value


def _substitute(pattern: Any, text: str, arguments: dict[str, Any], options: dict[str, Any]) -> str:
    template: str = arguments.get("replacement", "")
    # Counted as it goes: a pattern matching everywhere times a long replacement could
    # otherwise build a string far past the cap before anything could refuse it.
    written = len(text)

    def expand(match: Any) -> str:
        nonlocal written
        try:
            piece: str = match.expand(template)
        except (regex.error, IndexError) as exc:
            raise _invalid("replacement", f"is not a valid template: {exc}") from None
        written += len(piece) - (match.end() - match.start())
        _check_output(written)
        return piece

    result: str = pattern.sub(expand, text, count=arguments.get("count", 0), **options)
    return result


def _required(arguments: dict[str, Any], name: str, operation: str) -> Any:
    if name not in arguments:
        raise _invalid(name, f"is required for {operation}")
    return arguments[name]


def _check_output(chars: int) -> None:
    if chars > MAX_OUTPUT_CHARS:
        raise ToolError(
            f"the result would be {chars:,} characters long; the limit is {MAX_OUTPUT_CHARS:,}"
        )


def _invalid(field: str, message: str) -> InvalidToolArguments:
    return InvalidToolArguments(TOOL_NAME, [FieldError(field, message)])
