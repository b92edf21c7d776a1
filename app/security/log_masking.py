"""Secret values kept out of log lines: a `SecretMasker` learns every value the process opens,
and a logging filter on the handlers masks them in each record before it is written."""

import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping

from app.security.api_keys import KEY_PREFIX
from app.security.redaction import Redactor

# Values remembered at most; past it the oldest are forgotten first (a process holds far
# fewer: the secrets of the tenants it ran for, their former values included).
MAX_VALUES = 10_000
CREDENTIAL_MASK = "[credential]"
# Credentials known by their form, whoever they belong to: what follows a `Bearer` scheme,
# JWTs (three base64url parts, the first two JSON objects) and API keys, wherever they show
# (a header echoed in an error, a URL, an exception's text). A value masked already (`[…]`)
# or a placeholder for an argument (`Bearer %s`) is left as it is.
_CREDENTIALS = re.compile(
    r"(?i:(?<=bearer )|(?<=bearer%20))(?![\[%])[^\s\"',;&]+"
    r"|eyJ[\w-]*\.eyJ[\w-]*\.[\w-]*"
    rf"|{re.escape(KEY_PREFIX)}[\w-]{{8,}}"
)


def mask_credentials(text: str) -> str:
    """`text` with every bearer token, JWT and API key replaced by `CREDENTIAL_MASK`."""
    return _CREDENTIALS.sub(CREDENTIAL_MASK, text)


# Loggers whose formatters read a record's arguments themselves (uvicorn's access log unpacks
# them): their messages are never formatted here.
_READ_BY_FORMATTER = frozenset({"uvicorn.access"})


def _mask_split_credentials(record: logging.LogRecord) -> None:
    """A credential split between the message and its arguments (`"Bearer %s", token`) is
    known only once formatted: the record then keeps its message formatted and masked."""
    try:
        formatted = record.getMessage()
    except (TypeError, ValueError):
        return  # logging reports the mismatch itself when it formats the record
    masked = mask_credentials(formatted)
    if masked != formatted:
        record.msg, record.args = masked, None


class SecretMasker:
    """Replaces every known secret value in a text with `mask`, in every form `Redactor`
    knows (any case, JSON and URL escapes, base64 and hex). Values shorter than `min_chars`
    are not masked inside other text (they would mask every "a"). Safe to use from any
    thread: logging may run in several.

    Values are learnt in batches, each compiled on its own; batches of like size are merged
    (as an LSM tree's levels are), so that learning one more value costs its own forms, not
    every value's again, and a text is matched against a few patterns at most."""

    def __init__(self, mask: str, *, min_chars: int) -> None:
        self.mask = mask
        self._min_chars = min_chars
        self._values: dict[str, None] = {}  # insertion-ordered: oldest first
        # Oldest first; each holds the values of `_batches` at the same place.
        self._redactors: tuple[Redactor, ...] = ()
        self._batches: list[list[str]] = []
        self._lock = threading.Lock()

    def learn(self, values: Iterable[str]) -> None:
        """Remembers `values` (every form a log line could hold them in)."""
        with self._lock:
            new = [
                value
                for value in dict.fromkeys(values)
                if len(value) >= self._min_chars and value not in self._values
            ]
            if not new:
                return
            self._values.update(dict.fromkeys(new))
            batches = [*self._batches, new]
            redactors = [*self._redactors, self._redactor(new)]
            # As a binary counter carries: each value is compiled again log2(n) times.
            while len(batches) > 1 and len(batches[-2]) <= len(batches[-1]):
                merged = batches[-2] + batches.pop()
                batches[-1] = merged
                redactors[-2:] = [self._redactor(merged)]
            if len(self._values) > MAX_VALUES:
                batches, redactors = self._forget_oldest(batches, redactors)
            self._batches, self._redactors = batches, tuple(redactors)

    def _redactor(self, values: list[str]) -> Redactor:
        return Redactor(values, mask=self.mask, min_chars=self._min_chars)

    def _forget_oldest(
        self, batches: list[list[str]], redactors: list[Redactor]
    ) -> tuple[list[list[str]], list[Redactor]]:
        """Drops the oldest values past `MAX_VALUES` (with their batch, recompiled)."""
        excess = len(self._values) - MAX_VALUES
        forgotten = list(self._values)[:excess]
        for value in forgotten:
            del self._values[value]
        gone = set(forgotten)
        kept_batches, kept_redactors = [], []
        for batch, redactor in zip(batches, redactors, strict=True):
            kept = [value for value in batch if value not in gone]
            if len(kept) == len(batch):
                kept_batches.append(batch)
                kept_redactors.append(redactor)
            elif kept:
                kept_batches.append(kept)
                kept_redactors.append(self._redactor(kept))
        return kept_batches, kept_redactors

    def __call__(self, text: str) -> str:
        for redactor in self._redactors:
            text = redactor(text)
        return text


class MaskingFilter(logging.Filter):
    """Masks a record's message (with its arguments, formatted here), exception text and
    stack: whatever a handler would write, in any format. Known secret values and
    credentials (`mask_credentials`) are masked. Never drops a record."""

    def __init__(self, masker: SecretMasker) -> None:
        super().__init__()
        self._secrets = masker

    def _masker(self, text: str) -> str:
        return mask_credentials(self._secrets(text))

    def filter(self, record: logging.LogRecord) -> bool:
        mask = self._masker
        # Message and arguments are masked apart, not formatted here: some formatters read the
        # arguments themselves (uvicorn's access log unpacks them).
        if isinstance(record.msg, str):
            record.msg = mask(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(self._argument(arg) for arg in record.args)
        elif isinstance(record.args, Mapping):
            record.args = {key: self._argument(arg) for key, arg in record.args.items()}
        if record.args and record.name not in _READ_BY_FORMATTER:
            _mask_split_credentials(record)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask(record.exc_text)
        if record.stack_info:
            record.stack_info = mask(record.stack_info)
        return True

    def _argument(self, value: object) -> object:
        """An argument with secrets masked, formatting as it would have (`%d` numbers stay
        numbers; `%s` and `%r` of anything else show its text or repr masked)."""
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, str):
            return self._masker(value)
        text, shown = str(value), repr(value)
        masked_text, masked_shown = self._masker(text), self._masker(shown)
        if masked_text == text and masked_shown == shown:
            return value
        return _Masked(masked_text, masked_shown)


class _Masked:
    """What an argument holding a secret is logged as: its text and repr, masked."""

    __slots__ = ("_repr", "_text")

    def __init__(self, text: str, shown: str) -> None:
        self._text = text
        self._repr = shown

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return self._repr


def install_log_masking(
    masker: SecretMasker, loggers: Iterable[str] = ("", "uvicorn", "uvicorn.access")
) -> Callable[[], None]:
    """Adds a `MaskingFilter` to every handler of `loggers` (the root logger and uvicorn's,
    which do not propagate to it), as configured when it is called: call it once logging is
    set up. Returns what removes them again."""
    masking = MaskingFilter(masker)
    handlers = {handler for name in loggers for handler in logging.getLogger(name).handlers}
    for handler in handlers:
        handler.addFilter(masking)

    def uninstall() -> None:
        for handler in handlers:
            handler.removeFilter(masking)

    return uninstall
