"""A run recorded through the service's own write path (ReasoningChain -> ReasoningStepEvent ->
RunRecorder -> RunWrites), without an agent: benchmarks add the steps they need, store them batch
by batch as a run would, and complete the run."""

import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID, uuid4

from app.agents import RunEvent
from app.chain import (
    ChainCompletedEvent,
    ChainStartedEvent,
    ChainStatus,
    DoneEvent,
    ReasoningChain,
    ReasoningStep,
    ReasoningStepEvent,
    TaskState,
    TaskStatusEvent,
)
from app.chain.models import utc_now
from app.runs.audit import ToolAuditor
from app.runs.recorder import RunRecorder
from app.security.visibility import ReaderView, VisibilityPolicy
from app.storage.runs import Fence, RunnerLease, RunStores
from app.storage.types import RawJSON


@asynccontextmanager
async def bench_runner(stores: RunStores) -> AsyncIterator[str]:
    """This process as a runner of its own while it records, or a service on the same database
    would end its runs as orphans; yields the runner id."""
    runner = RunnerLease(
        f"bench:{os.getpid()}:{uuid4().hex[:12]}",
        socket.gethostname(),
        os.getpid(),
        utc_now(),
        lease_s=3600,
    )
    await stores.runners.register(runner)
    try:
        yield runner.id
    finally:
        await stores.runners.remove(runner.id)


class RecordedRun:
    """One task and its chain, stored as a run stores them."""

    def __init__(
        self, stores: RunStores, tenant_id: str, chain: ReasoningChain, runner_id: str
    ) -> None:
        self.stores = stores
        self.chain = chain
        self.task_id = UUID(chain.task_id)
        auditor = ToolAuditor(
            chain=chain,
            actor="bench",
            redactor=ReaderView(
                VisibilityPolicy(), roles=frozenset(), full_access=False, sensitive_fields=()
            ),
            audit_levels={},
        )
        self._recorder = RunRecorder(
            self.task_id, tenant_id, chain, auditor, fence=Fence(runner_id, 1)
        )
        self._batch: list[RunEvent] = [
            ChainStartedEvent(task_id=chain.task_id, chain_id=chain.id),
            TaskStatusEvent(task_id=chain.task_id, chain_id=chain.id, state=TaskState.WORKING),
        ]
        chain.add_listener(self._on_step)
        chain.status = ChainStatus.THINKING

    @classmethod
    async def start(
        cls,
        stores: RunStores,
        tenant_id: str,
        runner_id: str,
        *,
        request: dict[str, Any],
        model: str,
        agent_id: str,
        conversation_id: UUID | None = None,
        after_turns: int | None = None,
    ) -> "RecordedRun":
        """Stores a new task (a turn of `conversation_id`, if given) and its chain."""
        task_id, now = uuid4(), utc_now()
        chain = ReasoningChain(
            task_id=str(task_id), agent_id=agent_id, tenant_id=tenant_id, started_at=now
        )
        await stores.queue.create(
            {
                "id": task_id,
                "tenant_id": tenant_id,
                "user_id": "bench",
                "status": TaskState.SUBMITTED,
                "chain_id": chain.id,
                "request": request,
                "model": model,
                "last_seq": 0,
                "runner_id": runner_id,
                "owner_epoch": 1,
                "conversation_id": conversation_id,
                "created_at": now,
            },
            {
                "id": chain.id,
                "task_id": task_id,
                "tenant_id": tenant_id,
                "agent_id": agent_id,
                "status": ChainStatus.INITIALIZING,
                "metrics": RawJSON(chain.metrics.model_dump_json()),
                "started_at": now,
            },
            after_turns=after_turns,
        )
        return cls(stores, tenant_id, chain, runner_id)

    async def flush(self) -> None:
        """Stores what the run produced since the last flush, as one batch."""
        await self.stores.writes.append([self._recorder.record(self._batch, [])[0]])
        self._batch.clear()

    async def complete(self) -> None:
        chain = self.chain
        chain.finish(ChainStatus.COMPLETED)
        self._batch += [
            ChainCompletedEvent(task_id=chain.task_id, chain_id=chain.id, metrics=chain.metrics),
            DoneEvent(task_id=chain.task_id, chain_id=chain.id, final_state=TaskState.COMPLETED),
        ]
        await self.flush()

    def _on_step(self, step: ReasoningStep) -> None:  # as a run announces each step
        self._batch.append(
            ReasoningStepEvent(
                task_id=self.chain.task_id,
                chain_id=self.chain.id,
                timestamp=step.timestamp,
                step=step,
                metrics=self.chain.metrics.model_copy(),
            )
        )
