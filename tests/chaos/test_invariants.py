"""The invariant checks themselves, on made-up scenario outcomes: a clean one passes, and each
fault the chaos suite exists to catch is named by its invariant, with its task."""

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from tests.chaos.followers import Connection, Received, ReceivedEvent
from tests.chaos.invariants import Allowances, check
from tests.chaos.ledger import StoredTask
from tests.chaos.llm import USAGE, LLMCall, price
from tests.chaos.submit import Submitted

AT = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
TASK_ID = "00000000-0000-0000-0000-000000000017"
MARKER = 17
TASK_COST = price(*USAGE[0]) + price(*USAGE[1])


class Outcome:
    """One chaos task that went right: submitted, followed, stored and called as it should."""

    def __init__(self) -> None:
        self.submitted = [Submitted(MARKER, TASK_ID, "a", 1)]
        self.stored = {
            TASK_ID: StoredTask(
                task_id=TASK_ID,
                marker=MARKER,
                status="completed",
                runner_id="host:1:abc",
                resumes=0,
                last_seq=4,
                seqs=(1, 2, 3, 4),
                steps=2,
                llm_calls=2,
                billed_calls=2,
                billed_usd=TASK_COST,
                chain_cost_usd=TASK_COST,
            )
        }
        events = [event(1, "chain_started"), event(2, "task_status"), event(3, "reasoning_step")]
        self.received = Received(
            [*events, event(4, "done", final_state="completed")],
            [Connection("a", AT, None, "closed after done")],
        )
        self.calls = [
            LLMCall(MARKER, 0, "a", 0.0, "answered"),
            LLMCall(MARKER, 1, "a", 1.0, "answered"),
        ]
        self.allowances = Allowances()

    def invariants_broken(self) -> list[str]:
        violations = check(
            self.submitted, self.stored, {MARKER: self.received}, self.calls, self.allowances
        )
        return [f"{v.subject}: {v.invariant}" for v in violations]

    def store(self, **changes: object) -> None:
        self.stored[TASK_ID] = replace(self.stored[TASK_ID], **changes)  # type: ignore[arg-type]


def event(
    seq: int | None, kind: str, *, connection: int = 0, instance: str = "a", **data: object
) -> ReceivedEvent:
    body = json.dumps({"timestamp": AT.isoformat(), **data})
    return ReceivedEvent(seq, kind, body, instance, connection, AT)


def test_a_task_that_went_right_breaks_no_invariant() -> None:
    assert Outcome().invariants_broken() == []


def a_call_made_again(outcome: Outcome) -> None:
    outcome.calls.insert(1, LLMCall(MARKER, 0, "b", 0.5, "abandoned"))


def a_call_made_again_and_recorded_twice(outcome: Outcome) -> None:
    a_call_made_again(outcome)
    outcome.store(llm_calls=3)


def a_call_billed_twice(outcome: Outcome) -> None:
    outcome.store(billed_calls=3, billed_usd=TASK_COST + price(*USAGE[0]))


def an_unbilled_call(outcome: Outcome) -> None:
    outcome.store(billed_calls=1, billed_usd=price(*USAGE[1]), chain_cost_usd=price(*USAGE[1]))


def a_chain_cost_apart_from_its_records(outcome: Outcome) -> None:
    outcome.store(chain_cost_usd=TASK_COST + Decimal("0.000001"))


def an_event_lost_in_the_store(outcome: Outcome) -> None:
    outcome.store(seqs=(1, 2, 4))


def an_event_stored_twice(outcome: Outcome) -> None:
    outcome.store(seqs=(1, 2, 3, 3, 4))


def a_gap_in_the_stream(outcome: Outcome) -> None:
    del outcome.received.events[2]


def an_id_repeated_with_other_data(outcome: Outcome) -> None:
    outcome.received.events.insert(3, event(3, "reasoning_step", other=True))


def a_resume_that_replays_too_much(outcome: Outcome) -> None:
    outcome.received.connections.append(Connection("b", AT, 3, "closed after done"))
    outcome.received.events[3:] = [
        event(3, "reasoning_step", connection=1, instance="b"),
        event(4, "done", connection=1, instance="b", final_state="completed"),
    ]


def two_dones(outcome: Outcome) -> None:
    outcome.received.events.append(event(5, "done", final_state="completed"))
    outcome.store(last_seq=5, seqs=(1, 2, 3, 4, 5))


def a_stream_left_open_after_done(outcome: Outcome) -> None:
    outcome.received.connections[0].outcome = "ReadTimeout"


def a_failed_task(outcome: Outcome) -> None:
    outcome.store(status="failed")


def a_submission_stored_twice(outcome: Outcome) -> None:
    twin = "00000000-0000-0000-0000-000000000018"
    outcome.stored[twin] = replace(outcome.stored[TASK_ID], task_id=twin)


def a_call_nobody_submitted(outcome: Outcome) -> None:
    outcome.calls.append(LLMCall(99, 0, "a", 2.0, "answered"))


@pytest.mark.parametrize(
    ("fault", "invariant"),
    [
        (a_call_made_again, "LLM requests = LLM steps + calls made again"),
        (a_call_made_again_and_recorded_twice, "no LLM call made again but those in flight"),
        (a_call_billed_twice, "no LLM call billed twice"),
        (an_unbilled_call, "LLM steps = billed calls + calls cut by a limit"),
        (a_chain_cost_apart_from_its_records, "cost records = chain cost = usage priced"),
        (an_event_lost_in_the_store, "stored events 1..last_seq, each once"),
        (an_event_stored_twice, "stored events 1..last_seq, each once"),
        (a_gap_in_the_stream, "ids 1..last_seq, no gap"),
        (an_id_repeated_with_other_data, "a repeated id carries the same event"),
        (a_resume_that_replays_too_much, "a stream resumes exactly after Last-Event-ID"),
        (two_dones, "one done, last"),
        (a_stream_left_open_after_done, "the stream ends after done"),
        (a_failed_task, "ends completed"),
        (a_submission_stored_twice, "one task per submission"),
        (a_call_nobody_submitted, "every call is a submitted task's"),
    ],
)
def test_each_fault_is_named_by_its_invariant(
    fault: Callable[[Outcome], None], invariant: str
) -> None:
    outcome = Outcome()
    fault(outcome)
    broken = outcome.invariants_broken()
    assert any(invariant in line for line in broken), broken


def test_calls_in_flight_at_a_fault_may_be_made_again_when_the_scenario_says_so() -> None:
    outcome = Outcome()
    a_call_made_again(outcome)
    outcome.allowances = Allowances(repeated_calls={MARKER: 1})
    assert outcome.invariants_broken() == []


def test_calls_cut_by_a_limit_may_go_unbilled_when_the_scenario_counts_them() -> None:
    outcome = Outcome()
    an_unbilled_call(outcome)
    outcome.calls[0].state = "abandoned"  # cut before its reply: nothing to price
    outcome.allowances = Allowances(cut_calls=1)
    assert outcome.invariants_broken() == []


def test_a_message_names_the_task_and_the_numbers() -> None:
    outcome = Outcome()
    a_call_made_again_and_recorded_twice(outcome)
    [message] = [
        str(v)
        for v in check(
            outcome.submitted,
            outcome.stored,
            {MARKER: outcome.received},
            outcome.calls,
            Allowances(),
        )
        if "made again but" in v.invariant
    ]
    assert message.startswith(f"chaos task {MARKER} ({TASK_ID}): ")
    assert "1 made again, 0 allowed" in message
