"""What an HTTP header value may hold: visible ASCII, with spaces or tabs only between
visible characters (what the HTTP clients encode and h11 accepts). Anything else fails in the
client with an error quoting the value, or the character and its place in it: it is refused
before, by a message that shows none of it."""

import re

_SENDABLE = re.compile(r"(?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*)?")
# A prefix goes before a secret: it may end in a space ("Bearer ").
_PREFIX = re.compile(r"(?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*[ \t]?)?")

PROBLEM = (
    "holds what an HTTP header cannot carry: only visible ASCII characters, with spaces or "
    "tabs between them (none first or last, no line breaks, no other characters)"
)


def sendable(value: str) -> bool:
    """Whether `value` can be sent as a header's value as it is."""
    return _SENDABLE.fullmatch(value) is not None


def sendable_prefix(prefix: str) -> bool:
    """Whether `prefix` can start a header's value (it may end in one space or tab)."""
    return _PREFIX.fullmatch(prefix) is not None
