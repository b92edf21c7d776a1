"""A thousand streams, half of them on the instance that does not run their tasks: each event
reaches a follower there about as soon as it reaches one on the instance that runs the task
(that instance reads each task's new events once per notice for all its followers, not once
per follower), and the cluster keeps taking short tasks about as fast as with no stream open."""

import asyncio
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from tests.chaos.fleet import Fleet, fleet
from tests.chaos.llm import CALLS_PER_TASK, task_input
from tests.chaos.submit import Submitted, submit_task

TASKS = 250
FOLLOWERS_PER_TASK = 4  # two on the instance that runs the task, two on the other
PROBES = 200  # short tasks whose submissions are timed
PROBE_MARKERS = 10_000  # their markers start here; their model answers at once


def delay(marker: int, iteration: int) -> float:
    """Probes' calls answer at once, and so do the tasks' first calls (once the model is let
    go: all at once); their second calls in 1 to 5 s, spread by marker, so that their events
    come steadily after that burst."""
    if marker >= PROBE_MARKERS or iteration == 0:
        return 0.0
    return 1.0 + (marker % 50) * 0.08


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def p50(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


async def timed_submissions(group: Fleet, first: int) -> list[float]:
    """Submits PROBES short tasks, alternately to each instance, one after the other, each
    timed from its request to its 202."""
    took = []
    headers = {"Authorization": f"Bearer {group.token}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as client:
        for index in range(PROBES):
            instance = group.live()[index % 2]
            body = {"input": task_input(first + index)}
            started = time.monotonic()
            response = await client.post(f"{instance.base_url}/api/v1/tasks", json=body)
            took.append(time.monotonic() - started)
            assert response.status_code == 202, response.text
    return took


async def submitted_to_a(group: Fleet, markers: range) -> list[Submitted]:
    """Tasks submitted to `a`, which has room for them all: `a` runs them. The model holds
    its replies until the caller releases it, once each task has made its first call."""
    group.llm.hold()
    submitted = [await submit_task(group, marker, first=0) for marker in markers]
    wanted: set[int | None] = {task.marker for task in submitted}
    await group.changes.wait_for(
        lambda: wanted <= {call.marker for call in group.llm.calls},
        timeout_s=60,
        what="every task's first call",
    )
    return submitted


@dataclass
class Stream:
    """One stream read to its end by a light client (aiohttp: a thousand at once must not
    make the reader itself the bottleneck): each event's making (a step's timestamp, else the
    event's) and arrival."""

    task_id: str
    instance: str
    events: list[tuple[datetime, datetime]] = field(default_factory=list)
    opened: bool = False
    done: bool = False

    def lags_s(self, since: datetime) -> list[float]:
        """The lag of each event made after `since`."""
        return [(arrived - made).total_seconds() for made, arrived in self.events if made > since]

    async def read(self, session: aiohttp.ClientSession, base_url: str, changes: Any) -> None:
        url = f"{base_url}/api/v1/tasks/{self.task_id}/events"
        async with session.get(url) as response:
            assert response.status == 200, await response.text()
            kind = ""
            async for raw in response.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    arrived = datetime.now(UTC)
                    body = json.loads(line[6:])
                    step = body.get("step")
                    stamp = step["timestamp"] if isinstance(step, dict) else body.get("timestamp")
                    if stamp is not None:
                        self.events.append((datetime.fromisoformat(stamp), arrived))
                    if not self.opened:
                        self.opened = True
                        changes.notify()
                    if kind == "done":
                        self.done = True
                        return


async def test_streams_on_the_other_instance_keep_up_with_the_owners(tmp_path: Path) -> None:
    async with fleet(tmp_path, llm_delay_s=delay) as group:
        await group.start_all("a", "b")
        base = {instance.name: instance.base_url for instance in group.live()}
        # The baseline: the same load, no stream open.
        unwatched = await submitted_to_a(group, range(TASKS))
        group.llm.release()
        baseline = await timed_submissions(group, PROBE_MARKERS)
        await group.changes.wait_for(
            lambda: all(group.llm.answered(task.marker) == CALLS_PER_TASK for task in unwatched),
            timeout_s=120,
            what="the baseline's tasks done",
        )

        watched = await submitted_to_a(group, range(TASKS, 2 * TASKS))
        streams = [Stream(task.task_id, name) for task in watched for name in ("a", "a", "b", "b")]
        headers = {"Authorization": f"Bearer {group.token}"}
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(headers=headers, connector=connector) as session:
            reading = [
                asyncio.ensure_future(stream.read(session, base[stream.instance], group.changes))
                for stream in streams
            ]
            # Measured once every stream is open and has what its task stored so far: a
            # thousand streams opening at once keep both instances busy for a while (seconds
            # on a shared machine), which is not what a follower waits for once it follows.
            await group.changes.wait_for(
                lambda: all(stream.opened for stream in streams),
                timeout_s=60,
                what="every stream open",
            )
            following = datetime.now(UTC)
            group.llm.release()
            loaded = await timed_submissions(group, PROBE_MARKERS + PROBES)
            async with asyncio.timeout(120):
                await asyncio.gather(*reading)
        assert all(stream.done for stream in streams)
        lags = {
            name: [
                lag
                for stream in streams
                if stream.instance == name
                for lag in stream.lags_s(following)
            ]
            for name in ("a", "b")
        }
        # Every task was waiting for its first reply then: each of its followers gets at
        # least its final step and `done` after that.
        assert min(len(lags["a"]), len(lags["b"])) >= 2 * 2 * TASKS, {
            name: len(values) for name, values in lags.items()
        }
        owner, other = p99(lags["a"]), p99(lags["b"])
        owner_p50, other_p50 = p50(lags["a"]), p50(lags["b"])
        print(
            f"{len(streams)} streams: event lag p50/p99 on the owner {owner_p50 * 1000:.1f}/"
            f"{owner * 1000:.1f} ms ({len(lags['a'])} events), on the other instance "
            f"{other_p50 * 1000:.1f}/{other * 1000:.1f} ms ({len(lags['b'])} events); submit "
            f"p50/p99 {p50(baseline) * 1000:.1f}/{p99(baseline) * 1000:.1f} ms without streams, "
            f"{p50(loaded) * 1000:.1f}/{p99(loaded) * 1000:.1f} ms with"
        )
        # The other instance learns of an event once the owner stored it, and reads it then:
        # a commit, a notice and a read later than the owner's followers (10 ms more at p50
        # here, 0.2 s beside three busy processes; a 0.6-s pause per read fails it); were it
        # read once per follower, hundreds of reads per notice, it would be seconds behind.
        # Its tail also holds a burst (every task's first reply at once) read and fanned out
        # on a CPU shared with the owner, and in the suite with other tests (0.9 s more at p99
        # in the whole suite): held to twice the owner's and a second.
        assert other_p50 <= owner_p50 + 0.5, (
            f"the other instance's median lag {other_p50:.3f} s, owner {owner_p50:.3f}"
        )
        assert other <= 2 * owner + 1.0, (
            f"the other instance's p99 lag {other:.3f} s, owner {owner:.3f}"
        )
        # Submissions compete for the CPU with the streams' events (and, in the suite, with
        # other tests): their median stays within twice the baseline's, and their tail under
        # a second. A p99 of 200 submissions is their second slowest, which one busy moment
        # of a shared machine decides; reading the stored events once per follower instead
        # of once per notice would put both at seconds.
        assert p50(loaded) <= 2 * p50(baseline), (
            f"submit p50 {p50(loaded):.3f} s with streams, {p50(baseline):.3f} s without"
        )
        assert p99(loaded) <= 1.0, f"submit p99 {p99(loaded):.3f} s with streams"
