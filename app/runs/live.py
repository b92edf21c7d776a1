"""A run live in this process: what records it, what streams it, and whether it is stored."""

import asyncio
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from app.agents import AgentRun
from app.runs.channel import RunChannel
from app.runs.metrics import RunLabels
from app.runs.recorder import RunRecorder
from app.tools.recording import CostRecord


@dataclass(slots=True)
class LiveRun:
    task_id: UUID
    run: AgentRun
    recorder: RunRecorder
    labels: RunLabels
    # Its stored events, in order: what is published here is in the database.
    channel: RunChannel = field(default_factory=RunChannel)
    costs: list[CostRecord] = field(default_factory=list)
    # Held so the event loop's weak reference is not the only one to the reading task.
    reader: asyncio.Task[None] | None = None
    # Set once the run's last event is stored, or its end has been written for it.
    stored: asyncio.Event = field(default_factory=asyncio.Event)
    # Its events can no longer be stored: nothing more of it is queued or written.
    broken: bool = False
    # Cost rows of its batches that could not be stored, kept for the write that ends it.
    lost_costs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def stored_seq(self) -> int:
        """The last event of this run known to be stored."""
        return self.channel.last_seq
