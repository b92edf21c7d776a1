"""The invariants no fault may break, checked for every task of the scenario's tenant once its
streams are done: each one broken is reported as one line naming the task, the invariant and
the numbers, all of them together.

Per task, strictly unless `Allowances` says otherwise:
- one stored task per submission, and none that nobody submitted (a doubled submission);
- its follower got exactly one `done`, last, saying the stored status, and the stream ended;
- its follower's ids are 1..N with no gap, where N is the task's `last_seq` (reconnects may
  repeat an id only with the same data: the same JSON value), and each connection resumed
  exactly after its `Last-Event-ID`;
- the stored events' sequence numbers are exactly 1..last_seq;
- the stored status is final (`Allowances.final_state`);
- the LLM requests the fake received = the chain's LLM `tool_call` steps + the calls a fault
  legitimately made again (`repeated_calls`), and the fake saw exactly those repeats;
- LLM `tool_call` steps = cost records naming a model + calls cut by a limit (`cut_calls`, a
  total over the tenant);
- the sum of its cost records = its chain's stored cost = what the fake's answered replies'
  usage is worth at the model list's prices.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from app.chain import TaskState
from tests.chaos.fleet import Fleet
from tests.chaos.followers import Followers, Received, ReceivedEvent
from tests.chaos.ledger import StoredTask, read_ledger
from tests.chaos.llm import LLMCall
from tests.chaos.submit import Submitted

FINAL_STATES = frozenset(state.value for state in TaskState if state.is_terminal)


@dataclass(frozen=True)
class Allowances:
    """What a scenario's faults may legitimately cause. `repeated_calls`: by marker, LLM
    calls made again because they were in flight when their instance died; `cut_calls`: LLM
    calls (over all tasks) requested and stepped but never billed, because a limit cut them;
    `final_state`: the state every task must end in."""

    repeated_calls: Mapping[int, int] = field(default_factory=dict)
    cut_calls: int = 0
    final_state: str = "completed"


@dataclass(frozen=True)
class Violation:
    """One broken invariant: of what (a task, all tasks, the fake LLM), which, the numbers."""

    subject: str
    invariant: str
    detail: str

    def __str__(self) -> str:
        return f"{self.subject}: {self.invariant}: {self.detail}"


def check(
    submitted: Sequence[Submitted],
    stored: Mapping[str, StoredTask],
    streams: Mapping[int, Received],
    calls: Sequence[LLMCall],
    allowances: Allowances,
    *,
    unexpected: Sequence[str] = (),
) -> list[Violation]:
    """Every broken invariant (see the module's docstring); none: all hold. `unexpected`:
    the requests the fake LLM refused (no chaos marker, a call past a task's last, an
    unknown path)."""
    violations: list[Violation] = []
    known = {task.task_id for task in submitted}
    for task_id, unknown in stored.items():
        if task_id not in known:
            violations.append(
                Violation(
                    f"task {task_id}",
                    "one task per submission",
                    f"not submitted (input marker {unknown.marker}): a submission stored twice?",
                )
            )
    unbilled: dict[str, int] = {}
    for task in submitted:
        subject = f"chaos task {task.marker} ({task.task_id})"
        found = stored.get(task.task_id)
        if found is None:
            violations.append(Violation(subject, "one task per submission", "not stored"))
            continue
        problems = [
            *_stream_problems(streams.get(task.marker), found),
            *_store_problems(found, allowances),
            *_call_problems(task.marker, found, calls, allowances),
        ]
        violations += [Violation(subject, invariant, detail) for invariant, detail in problems]
        if found.llm_calls > found.billed_calls:
            unbilled[subject] = found.llm_calls - found.billed_calls
    if sum(unbilled.values()) != allowances.cut_calls:
        violations.append(
            Violation(
                "all tasks",
                "LLM steps = billed calls + calls cut by a limit",
                f"{sum(unbilled.values())} LLM step(s) without a cost record "
                f"({unbilled or 'none'}), {allowances.cut_calls} cut by a limit",
            )
        )
    markers = {task.marker for task in submitted}
    strays = [call for call in calls if call.marker is not None and call.marker not in markers]
    if strays:
        violations.append(
            Violation(
                "fake LLM",
                "every call is a submitted task's",
                f"{len(strays)} call(s) of other tasks: {strays[:3]}",
            )
        )
    if unexpected:
        violations.append(
            Violation(
                "fake LLM",
                "every request is a chaos task's call",
                f"{len(unexpected)} refused: {list(unexpected)[:3]}",
            )
        )
    return violations


def _stream_problems(received: Received | None, task: StoredTask) -> list[tuple[str, str]]:
    if received is None:
        return [("stream followed", "no follower")]
    problems: list[tuple[str, str]] = []
    types = [event.type for event in received.events]
    if types.count("done") != 1 or types[-1:] != ["done"]:
        problems.append(
            (
                "one done, last",
                f"{types.count('done')} done event(s); the last of "
                f"{len(types)} was {types[-1:] or 'none'}",
            )
        )
    dones = [event for event in received.events if event.type == "done"]
    if dones and dones[-1].json.get("final_state") != task.status:
        problems.append(
            (
                "done says the stored status",
                f"done says {dones[-1].json.get('final_state')}, stored {task.status}",
            )
        )
    ending = received.connections[-1].outcome if received.connections else "none"
    if dones and ending != "closed after done":
        problems.append(("the stream ends after done", f"its last connection: {ending}"))
    # Same data means the same JSON value: a replay from the store may spell it otherwise.
    by_id: dict[int, ReceivedEvent] = {}
    for event in received.events:
        if event.id is None:
            continue
        first = by_id.setdefault(event.id, event)
        if first.json != event.json:
            problems.append(
                (
                    "a repeated id carries the same event",
                    f"id {event.id} came with {first.data[:200]!r} and {event.data[:200]!r}",
                )
            )
    ids = sorted(by_id)
    if ids != list(range(1, task.last_seq + 1)):
        problems.append(
            ("ids 1..last_seq, no gap", f"{_gaps(ids, task.last_seq)} (last_seq {task.last_seq})")
        )
    problems += _resume_problems(received)
    return problems


def _resume_problems(received: Received) -> list[tuple[str, str]]:
    """Each connection's ids run on from its Last-Event-ID, one by one."""
    problems = []
    for index, connection in enumerate(received.connections):
        ids = [e.id for e in received.events if e.connection == index and e.id is not None]
        start = (connection.last_event_id or 0) + 1
        if ids != list(range(start, start + len(ids))):
            problems.append(
                (
                    "a stream resumes exactly after Last-Event-ID",
                    f"connection {index} to {connection.instance} after id "
                    f"{connection.last_event_id} sent ids {ids[:20]}",
                )
            )
    return problems


def _store_problems(task: StoredTask, allowances: Allowances) -> list[tuple[str, str]]:
    problems = []
    if task.seqs != tuple(range(1, task.last_seq + 1)):
        problems.append(
            (
                "stored events 1..last_seq, each once",
                f"{_gaps(list(task.seqs), task.last_seq)} (last_seq {task.last_seq})",
            )
        )
    if task.status != allowances.final_state:
        final = "final" if task.status in FINAL_STATES else "not final"
        problems.append(
            (
                "ends " + allowances.final_state,
                f"stored status {task.status} ({final}), "
                f"runner {task.runner_id}, resumed {task.resumes} time(s)",
            )
        )
    return problems


def _call_problems(
    marker: int, task: StoredTask, calls: Sequence[LLMCall], allowances: Allowances
) -> list[tuple[str, str]]:
    mine = [call for call in calls if call.marker == marker]
    allowed = allowances.repeated_calls.get(marker, 0)
    problems = []
    if len(mine) != task.llm_calls + allowed:
        problems.append(
            (
                "LLM requests = LLM steps + calls made again",
                f"{len(mine)} request(s), {task.llm_calls} step(s), {allowed} allowed again "
                f"({_by_iteration(mine)})",
            )
        )
    made_again = len(mine) - len({call.iteration for call in mine})
    if made_again != allowed:
        problems.append(
            (
                "no LLM call made again but those in flight at a fault",
                f"{made_again} made again, {allowed} allowed ({_by_iteration(mine)})",
            )
        )
    if task.billed_calls > task.llm_calls:
        problems.append(
            (
                "no LLM call billed twice",
                f"{task.billed_calls} cost record(s) for {task.llm_calls} LLM step(s)",
            )
        )
    priced = sum((call.cost for call in mine), Decimal(0))
    if not (task.billed_usd == task.chain_cost_usd == priced):
        problems.append(
            (
                "cost records = chain cost = usage priced",
                f"records {task.billed_usd}, chain {task.chain_cost_usd}, "
                f"the fake's answered usage {priced}",
            )
        )
    return problems


def _by_iteration(calls: Sequence[LLMCall]) -> str:
    return ", ".join(f"#{c.iteration} from {c.instance}: {c.state}" for c in calls) or "none"


def _gaps(ids: Sequence[int], last: int) -> str:
    expected = set(range(1, last + 1))
    missing = sorted(expected - set(ids))
    extra = sorted({i for i in ids if i not in expected or ids.count(i) > 1})
    return f"missing {missing[:20]}, unexpected or repeated {extra[:20]}"


def describe(violations: Sequence[Violation]) -> str:
    return f"{len(violations)} invariant(s) broken:\n" + "\n".join(f"- {v}" for v in violations)


async def assert_invariants(
    fleet: Fleet,
    submitted: Sequence[Submitted],
    followers: Followers,
    allowances: Allowances | None = None,
) -> None:
    """Reads what the fleet's database stored and raises `AssertionError` listing every
    broken invariant."""
    stored = await read_ledger(fleet.database_url, fleet.tenant)
    streams = {follower.marker: follower.received for follower in followers}
    violations = check(
        submitted,
        stored,
        streams,
        fleet.llm.calls,
        allowances or Allowances(),
        unexpected=fleet.llm.unexpected,
    )
    if violations:
        raise AssertionError(describe(violations))
