"""A rolling deploy's SIGTERM of an instance under load (100 tasks whose model calls take 3 s):
the instance stops claiming and starting calls at once, lets the calls under way finish and be
stored, hands its runs over and ends its streams with a reconnectable close — all within the
grace — and the other instance goes on with them. No call is made twice, no task fails,
no stream loses an event, and the drain logs no traceback."""

import time
from pathlib import Path

from tests.chaos.fleet import fleet
from tests.chaos.followers import following
from tests.chaos.invariants import Allowances, assert_invariants
from tests.chaos.submit import submit_tasks

TASKS = 100
CALL_S = 3.0
IN_FLIGHT = 20
# Four times the default. A call's 3 s are the fake LLM's from the moment its request reaches
# it, and with the suite's other workers busy two delays add up: this process (which serves
# the fake LLM beside 100 followers) may read a request sent before the signal seconds late, and
# a call that began before it may leave the instance seconds later (LiteLLM prepares each
# request on a worker thread, shared and queued under load); up to 8.6 s in full runs. A call
# whose reply comes past the grace is cut (counted) and made again: what this test catches.
GRACE_S = 20.0
# The process's own exit after its drain: its lifespan's last steps and the interpreter's.
EXIT_S = 3.0


async def test_a_terminated_instance_finishes_its_calls_in_flight_and_none_is_repeated(
    tmp_path: Path,
) -> None:
    async with fleet(
        tmp_path, llm_delay_s=CALL_S, OMNIFORGE_SHUTDOWN_GRACE_S=str(GRACE_S)
    ) as group:
        llm = group.llm
        await group.start_all("a", "b")
        submitted = await submit_tasks(group, range(TASKS))
        async with following(group, submitted, deadline_s=120, on_other=True) as followers:
            # Under load: b's runs in their model calls (a call lasts 3 s: they are in one
            # most of the time, until they are done).
            await group.changes.wait_for(
                lambda: len(llm.open_calls("b")) >= IN_FLIGHT,
                timeout_s=60,
                what=f"{IN_FLIGHT} calls under way on b",
            )
            in_flight = llm.open_calls("b")
            stopped = time.monotonic()
            code = await group.terminate("b")
            took_s = time.monotonic() - stopped
            await followers.until_done()
        assert all(call.state == "answered" for call in in_flight), in_flight
        assert llm.repeated() == {}, "calls made twice: " + ", ".join(
            f"#{call.marker}.{call.iteration} from {call.instance} "
            f"{call.received_at - stopped:+.2f} s: {call.state}"
            for call in llm.calls
            if call.marker in llm.repeated()
        )
        await assert_invariants(group, submitted, followers, Allowances())
        assert took_s < GRACE_S + EXIT_S, f"the drain took {took_s:.1f} s"
        assert code in (0, -15), f"b exited with {code}"
        log = group.instances["b"].log
        assert "Traceback" not in log, log
        assert "ERROR" not in log, log
        reconnected = [
            connection
            for follower in followers
            for connection in follower.received.connections
            if connection.instance == "b" and connection.outcome != "closed after done"
        ]
        assert reconnected, "no stream was open on b when it drained"
        print(
            f"{len(in_flight)} calls in flight on b at its SIGTERM, all answered; it exited "
            f"{took_s:.1f} s later; {len(reconnected)} streams moved to a"
        )
