"""Users' patterns run bounded: a backtracking pattern stops at the check's budget (shared by
every match of the check), lets other threads run meanwhile, and fails a tool call's
arguments with that reason; patterns the engine cannot run are refused; only patterns that
cannot backtrack are applied on the event loop."""

import threading
import time

import pytest

from app.tools.builtin.llm import _PARAMETERS as LLM_PARAMETERS
from app.tools.errors import FieldError
from app.tools.patterns import (
    CHECK_BUDGET_S,
    MAX_PATTERN_CHARS,
    PatternRefused,
    PatternTimeout,
    compiled,
    pattern_budget,
    search,
)
from app.tools.schemas import has_patterns
from app.tools.validation import compile_validator, field_errors

EVIL = "^(a|a)+$"
VICTIM = "a" * 27 + "!"  # Python's `re` needs about 30 s here to say no


def test_a_backtracking_pattern_stops_at_the_budget() -> None:
    started = time.perf_counter()
    with pytest.raises(PatternTimeout, match=r"took longer than the 0\.5 s"):
        search(EVIL, VICTIM)
    # The engine checks its clock as it goes: some overshoot, and a busy machine.
    assert time.perf_counter() - started < CHECK_BUDGET_S * 6
    assert search(EVIL, "aaaa")
    assert not search("^(a+)+$", VICTIM)  # the classic is recognised and fails at once


def test_every_match_of_a_check_shares_one_budget() -> None:
    with pattern_budget(0.2):
        with pytest.raises(PatternTimeout):
            search(EVIL, VICTIM)
        started = time.perf_counter()
        with pytest.raises(PatternTimeout):
            search("^b$", "b")  # nothing left for it
        assert time.perf_counter() - started < 0.05


def test_other_threads_run_while_a_pattern_backtracks() -> None:
    ticks = 0
    done = threading.Event()

    def backtrack() -> None:
        try:
            search(EVIL, VICTIM)
        except PatternTimeout:
            pass
        finally:
            done.set()

    worker = threading.Thread(target=backtrack)
    worker.start()
    while not done.is_set():
        ticks += 1
        done.wait(0.001)
    worker.join()
    # With the interpreter held (Python's `re`) this thread would not have ticked at all.
    assert ticks >= 50


def test_patterns_the_engine_cannot_run_are_refused() -> None:
    with pytest.raises(PatternRefused, match=f"at most {MAX_PATTERN_CHARS} characters"):
        compiled("a" * (MAX_PATTERN_CHARS + 1))
    with pytest.raises(PatternRefused, match="not a regular expression"):
        compiled("(unclosed")


def test_a_tool_calls_arguments_fail_when_their_check_runs_out_of_time() -> None:
    validator = compile_validator(
        {
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": EVIL}},
            "patternProperties": {EVIL: {"type": "integer"}},
        }
    )
    assert field_errors(validator, {"code": "aaa"}) == []
    [error] = field_errors(validator, {"code": VICTIM})
    assert error.field == ""
    assert "cannot be checked" in error.message
    assert field_errors(validator, {"code": "b"}) == [
        FieldError("code", "'b' does not match '^(a|a)+$'")
    ]


# Anchored, at most one part repeated a variable number of times, no group or alternative.
LINEAR = [
    "^[A-Za-z0-9_-]{1,64}$",
    "^[a-z]+$",
    r"^\d{4}-\d{2}-\d{2}$",
    "^[a-z]+[a-z]{5}!$",
    "^a.*b$",
    r"^[\]x]+",
]
MAY_BACKTRACK = [
    EVIL,
    "^(a+)+$",
    "[a-z]+$",  # not anchored: tried at every position
    r"^\d+\d+$",
    "^a*a*b$",
    "^a|b$",
    "(?i)^a+$",
    r"^\p{L}+$",
]


def _schema(pattern: str) -> dict[str, object]:
    return {"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}}}


def test_only_patterns_that_cannot_backtrack_are_applied_on_the_event_loop() -> None:
    hostile = "a" * 200_000 + "!"
    for pattern in LINEAR:
        assert not has_patterns(_schema(pattern)), pattern
        started = time.perf_counter()
        with pattern_budget():
            search(pattern, hostile)  # no PatternTimeout: one pass over the text
        assert time.perf_counter() - started < CHECK_BUDGET_S, pattern
    for pattern in MAY_BACKTRACK:
        assert has_patterns(_schema(pattern)), pattern
    assert has_patterns({"type": "object", "patternProperties": {"^a$": {}}})
    # The LLM tool's one pattern (a response format's name) is linear: every LLM call's
    # arguments are checked without a thread hop.
    assert not has_patterns(LLM_PARAMETERS)
