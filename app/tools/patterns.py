"""Regular expressions a user wrote (a JSON Schema's `pattern` and `patternProperties`, a
`format: regex` value), compiled and matched by the `regex` engine under a time budget.

Python's own `re` backtracks without limit and holds the interpreter lock while it does: one
`^(a+)+$` against a 27-character answer froze the whole service for seconds. `regex` takes a
`timeout` and, matching a `str` with `concurrent=True`, lets other threads run meanwhile; every
match made within one `pattern_budget` shares that budget, so a schema with a thousand patterns
cannot multiply it. Checks that can meet such a pattern run in a worker thread.
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache

import regex  # type: ignore[import-untyped]

from app.errors import OmniForgeError

MAX_PATTERN_CHARS = 1_000
"""A longer pattern is refused where it is defined."""

CHECK_BUDGET_S = 0.5
"""The matching time one check (an answer, a call's arguments) may spend on all its patterns."""

_deadline: ContextVar[float | None] = ContextVar("pattern_deadline", default=None)


class PatternRefused(OmniForgeError, ValueError):
    """A pattern this service does not run: too long, or not a regular expression."""


class PatternTimeout(OmniForgeError):
    """Matching used up the check's time budget; the value is judged not to match."""

    def __init__(self, pattern: str) -> None:
        shown = pattern if len(pattern) <= 60 else pattern[:59] + "…"
        super().__init__(
            f"matching the pattern {shown!r} took longer than the {CHECK_BUDGET_S:g} s "
            "a check may take (a pattern that backtracks without end?)"
        )
        self.pattern = pattern


@lru_cache(maxsize=1024)
def compiled(pattern: str) -> "regex.Pattern[str]":
    """`pattern` compiled by the `regex` engine; `PatternRefused` if it cannot be."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternRefused(
            f"a pattern may have at most {MAX_PATTERN_CHARS} characters, not {len(pattern)}"
        )
    try:
        return regex.compile(pattern)
    except (regex.error, ValueError, OverflowError, RecursionError) as exc:
        raise PatternRefused(f"not a regular expression: {exc}") from None


@contextmanager
def pattern_budget(seconds: float = CHECK_BUDGET_S) -> Iterator[None]:
    """Every match within shares `seconds` of matching time; `PatternTimeout` past it."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text` (JSON Schema's `pattern` semantics),
    within what is left of the current budget (a budget of its own outside one)."""
    deadline = _deadline.get()
    left = CHECK_BUDGET_S if deadline is None else deadline - time.monotonic()
    if left <= 0:
        raise PatternTimeout(pattern)
    try:
        return compiled(pattern).search(text, timeout=left, concurrent=True) is not None
    except TimeoutError:
        raise PatternTimeout(pattern) from None
