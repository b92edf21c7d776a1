"""Agents calling each other across A2A hops, back into this service: a message's hop trail
(`app.tools.a2a.extension`) names the tasks it comes from; those that are this tenant's own
tasks tell which agents already work above it and how deep it is. Refused before anything is
made: an agent already on the trail (a cycle through remote agents, which the local cycle
check cannot see) and a depth over `OMNIFORGE_MAX_AGENT_DEPTH` counted across the hops
(the A2A server refuses them).

A task a message started keeps the trail it came with in its metadata (`TRAIL_KEY`), so that
a message of its own run, coming back, is followed further up."""

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.resources.agents import DEFAULT_AGENT
from app.storage.records import TaskRecord
from app.storage.tasks import TaskRepository
from app.tools.a2a.extension import checked_trail

TRAIL_KEY = "a2a_trail"
"""Where a task an A2A message started keeps the message's trail, in its metadata."""


@dataclass
class Hops:
    """What a trail tells of this tenant's own tasks above a message: the agents working
    there (nearest first) and the depth the message's task would run at."""

    agents: list[str] = field(default_factory=list)
    depth: int = 0


async def hops_above(
    connection: AsyncConnection, tenant_id: str, trail: list[str], *, max_depth: int
) -> Hops:
    """Follows `trail` through the tenant's own tasks: the first it names that is one of
    them is the calling task; its family above it, then the trail its root task came with,
    are followed in turn (at most `max_depth` + 1 hops: deeper is refused anyway). Ids that
    are no task of this tenant (another service's) are passed over."""
    tasks = TaskRepository(connection, tenant_id)
    hops = Hops()
    seen: set[UUID] = set()
    while trail and hops.depth <= max_depth:
        calling = await _first_own(tasks, trail, seen)
        if calling is None:
            break
        hops.depth += calling.depth + 1
        task: TaskRecord | None = calling
        root = calling
        while task is not None and task.id not in seen:
            seen.add(task.id)
            hops.agents.append(task.agent_name or DEFAULT_AGENT)
            root = task
            task = None if task.parent_task_id is None else await tasks.get(task.parent_task_id)
        trail = checked_trail(_metadata(root).get(TRAIL_KEY))
    return hops


async def _first_own(tasks: TaskRepository, trail: list[str], seen: set[UUID]) -> TaskRecord | None:
    for entry in trail:
        try:
            task_id = UUID(entry)
        except ValueError:
            continue
        if task_id in seen:
            continue
        task = await tasks.get(task_id)
        if task is not None:
            return task
    return None


def _metadata(task: TaskRecord) -> dict[str, Any]:
    metadata = task.request.get("metadata")
    return metadata if isinstance(metadata, dict) else {}
