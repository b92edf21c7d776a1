"""Two instances on a private Postgres run two-call tasks; one of them is SIGKILLed while its
runs wait on LLM calls. The other resumes its runs from their stored steps: every stream
reaches `done` through reconnects, every task completes, and nothing is run, paid or lost
twice. The only LLM calls made again are the ones the killed instance had open at the fake LLM
when it died; the surviving instance drops no stream; and the events that came live reached
their followers promptly."""

import time
from collections import Counter
from pathlib import Path
from statistics import median

from tests.chaos.fleet import fleet
from tests.chaos.followers import Followers, following
from tests.chaos.invariants import Allowances, assert_invariants
from tests.chaos.ledger import read_ledger
from tests.chaos.llm import ChaosLLM
from tests.chaos.submit import submit_tasks

TASKS = 20
# LLM calls of 0.5, 1 or 1.5 s by task: at the kill, tasks are at every stage.
CALL_S = (0.5, 1.0, 1.5)
# On one host a killed instance is known dead at the other's next heartbeat (its pid is
# gone), so its runs resume within one. Heartbeats of 3 s (a lease of 9 s) leave room for a
# slow start-up: an instance registers its lease stamped with the moment its start-up began
# and renews it a heartbeat after start-up ended, so with a shorter lease (1.5 s for 0.5 s
# heartbeats) the other instance takes a starting one for dead and removes its lease for
# good; from then on it gives that instance's runs back to the queue while they run.
HEARTBEAT_S = "3"
# Live events (made while their follower's connection was open) reach it about at once:
# bounds loose enough for a busy machine, tight enough to tell pushing from polling.
MEDIAN_LIVE_LAG_S = 1.0
MAX_LIVE_LAG_S = 5.0


def parked(llm: ChaosLLM, followers: Followers) -> bool:
    """Whether every run waits on a held LLM call, and every reply sent before is stored
    (its result reached the task's follower): nothing is in transit between the instances,
    the fake LLM and the database."""
    return all(
        follower.done
        or (
            any(call.marker == follower.marker for call in llm.open_calls())
            and follower.received.llm_results() >= llm.answered(follower.marker)
        )
        for follower in followers
    )


async def test_a_killed_instances_runs_complete_elsewhere_repeating_only_its_calls_in_flight(
    tmp_path: Path,
) -> None:
    async with fleet(
        tmp_path,
        llm_delay_s=lambda marker, _: CALL_S[marker % len(CALL_S)],
        OMNIFORGE_RUNNER_HEARTBEAT_S=HEARTBEAT_S,
    ) as group:
        llm = group.llm
        await group.start_all("a", "b")
        submitted = await submit_tasks(group, range(TASKS))
        assert {task.instance for task in submitted} == {"a", "b"}
        async with following(group, submitted, deadline_s=45, on_other=True) as followers:
            # Mid-run: the first tasks are done, the others in their first or second call.
            await group.changes.wait_for(
                lambda: any(follower.done for follower in followers),
                timeout_s=20,
                what="a first task done",
            )
            llm.hold()
            await group.changes.wait_for(
                lambda: parked(llm, followers),
                timeout_s=20,
                what="every run waiting on a held LLM call",
                describe=followers.describe_unfinished,
            )
            in_flight = llm.open_calls("b")
            killed_at = time.monotonic()
            await group.kill("b")
            llm.release()
            await group.changes.wait_for(
                lambda: all(call.state == "abandoned" for call in in_flight),
                timeout_s=10,
                what="the killed instance's calls to go unanswered",
            )
            await followers.until_done()
            took_s = time.monotonic() - killed_at

        again = Counter(call.marker for call in in_flight if call.marker is not None)
        await assert_invariants(group, submitted, followers, Allowances(repeated_calls=again))
        assert in_flight, "the kill found no call in flight on b: it tested nothing"
        assert llm.repeated() == dict(again), "exactly the calls in flight at the kill again"
        connections = [c for follower in followers for c in follower.received.connections]
        assert any(c.instance == "b" and c.outcome != "closed after done" for c in connections), (
            "no stream was cut by the kill: none was followed through it"
        )
        dropped = [c for c in connections if c.instance == "a" and c.outcome != "closed after done"]
        assert dropped == [], "the surviving instance dropped streams"
        resumed = {
            task.marker
            for task in (await read_ledger(group.database_url, group.tenant)).values()
            if task.resumes
        }
        assert resumed == set(again), "exactly the killed instance's unfinished runs resumed"
        lags = followers.live_lags_s()
        cut = {(call.marker, call.iteration) for call in in_flight}
        made_again_at = [
            call.received_at
            for call in llm.calls
            if call.received_at > killed_at and (call.marker, call.iteration) in cut
        ]
        resumed_after_s = min(made_again_at) - killed_at
        # Shown with -s, and with a failure: what this run measured.
        print(
            f"{TASKS} tasks, {len(in_flight)} call(s) in flight at the kill made again, the "
            f"first {resumed_after_s:.1f} s after it, the last task done {took_s:.1f} s after "
            f"it; {len(lags)} live events, lag median {median(lags):.3f} s, max {lags[-1]:.3f} s"
        )
        assert median(lags) < MEDIAN_LIVE_LAG_S, f"live events came {median(lags):.2f} s late"
        assert lags[-1] < MAX_LIVE_LAG_S, f"a live event came {lags[-1]:.2f} s late"
