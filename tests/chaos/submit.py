"""Submitting chaos tasks as a careful client does through faults: each submission carries an
`Idempotency-Key` of its own, and is retried, on the next live instance, after a connection
error or a 429/502/503/504 (waiting what `Retry-After` says), until it lands or its deadline
passes. A retried submission that did land the first time names the same task."""

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass

import httpx

from tests.chaos.fleet import Fleet
from tests.chaos.llm import task_input
from tests.chaos.retries import RETRY_STATUSES, Backoff

REQUEST_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Submitted:
    """A task that landed: its marker, id, the instance that accepted it, after how many
    attempts (1: the first), and whether that answer was a replay of an earlier attempt's
    (`Idempotent-Replayed`: an attempt that seemed to fail had landed)."""

    marker: int
    task_id: str
    instance: str
    attempts: int
    replayed: bool = False


async def submit_task(
    fleet: Fleet, marker: int, *, first: int = 0, deadline_s: float = 30.0
) -> Submitted:
    """Submits chaos task `marker`, first to the `first`-th live instance (modulo their
    number), then to the next after each failed attempt. Fails with every attempt's outcome
    once `deadline_s` has passed, or at once on an answer no retry can change."""
    key = f"chaos-{fleet.tenant}-{marker}"
    headers = {"Authorization": f"Bearer {fleet.token}", "Idempotency-Key": key}
    body = {"input": task_input(marker)}
    outcomes: list[str] = []
    backoff = Backoff()
    turn = first
    ends = time.monotonic() + deadline_s
    async with httpx.AsyncClient(headers=headers, timeout=REQUEST_TIMEOUT_S) as client:
        while time.monotonic() < ends:
            live = fleet.live()
            if not live:
                raise AssertionError(f"chaos task {marker}: no live instance to submit to")
            instance = live[turn % len(live)]
            turn += 1
            try:
                response = await client.post(f"{instance.base_url}/api/v1/tasks", json=body)
            except httpx.TransportError as exc:
                outcomes.append(f"{instance.name}: {type(exc).__name__}")
                wait = backoff.next_s()
            else:
                outcomes.append(f"{instance.name}: {response.status_code}")
                if response.status_code == 202:
                    task_id = str(response.json()["task_id"])
                    replayed = response.headers.get("Idempotent-Replayed") == "true"
                    return Submitted(marker, task_id, instance.name, len(outcomes), replayed)
                if response.status_code not in RETRY_STATUSES:
                    raise AssertionError(
                        f"chaos task {marker}: {instance.name} answered "
                        f"{response.status_code}: {response.text}"
                    )
                wait = backoff.next_s(response)
            await asyncio.sleep(max(0.0, min(wait, ends - time.monotonic())))
    raise AssertionError(
        f"chaos task {marker} did not land within {deadline_s} s: {', '.join(outcomes)}"
    )


async def submit_tasks(
    fleet: Fleet, markers: Iterable[int], *, deadline_s: float = 30.0
) -> list[Submitted]:
    """Submits the chaos tasks at once, round-robin over the live instances; returns them in
    the order of `markers`."""
    try:
        async with asyncio.TaskGroup() as group:  # one failing cancels the others
            tasks = [
                group.create_task(submit_task(fleet, marker, first=turn, deadline_s=deadline_s))
                for turn, marker in enumerate(markers)
            ]
    except ExceptionGroup as failed:
        reasons = "; ".join(f"{type(e).__name__}: {e}" for e in failed.exceptions)
        raise AssertionError(f"submitting failed: {reasons}") from failed
    return [task.result() for task in tasks]
