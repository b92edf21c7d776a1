"""Chain reads on behalf of a caller: within its tenant, as its view shows them, each read of
steps audited with the runs' writes before the steps are served."""

import asyncio
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain import ChainStatus
from app.governance.audit import AuditAction
from app.governance.auditing import chain_read
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.runs.earlier_turns import learn_earlier_turns
from app.runs.errors import NotFound
from app.runs.manager import RunManager
from app.runs.recorder import step_facts
from app.security.visibility import ReaderView
from app.storage.chains import ChainRepository, StepRow
from app.storage.database import Database
from app.storage.pagination import Cursor, Page
from app.storage.records import ChainRecord, TaskRecord
from app.storage.tasks import TaskRepository


@dataclass(frozen=True, slots=True)
class ChainRead:
    """A chain as one caller may see it: its record, the chains its calls started (oldest
    first) and its steps as JSON documents, in order (stored ones as they are, the others
    rendered for the caller's view)."""

    chain: ChainRecord
    child_ids: list[UUID]
    steps: list[str]


@dataclass(frozen=True, slots=True)
class StepsRead:
    """One page of a chain's steps as one caller may see them (JSON documents), and the step
    number the next page starts after (None: this is the last)."""

    steps: list[str]
    next_after: int | None


@dataclass(frozen=True, slots=True)
class ChainService:
    """A tenant's chains as callers may see them: without `chain:read_full`, steps filtered
    by their visibility and the tools' sensitive fields (`runs` knows them) redacted. Every
    read of steps is audited through `runs`, stored with its writes."""

    database: Database
    runs: RunManager

    async def read(
        self,
        caller: Caller,
        *,
        chain_id: UUID | None = None,
        task_id: UUID | None = None,
        action: AuditAction = AuditAction.CHAIN_READ,
    ) -> ChainRead:
        """A chain with its steps, by its id or its task's; audited as `action`."""
        view = caller.view(self.runs.tool_sensitive_fields)
        task: TaskRecord | None = None
        async with self.database.read() as connection:
            chains = ChainRepository(connection, caller.tenant_id)
            if task_id is not None:
                task = await TaskRepository(connection, caller.tenant_id).get(task_id)
                if task is None:
                    raise NotFound("task", task_id)
                chain_id = task.chain_id
            assert chain_id is not None
            chain = await _find_chain(chains, chain_id)
            children = await chains.child_ids(chain_id)
            audited = self._audit(caller, chain, view, action)
            if view.full_access:
                documents = await chains.step_documents(chain_id)
            else:
                await _learn_earlier_turns(connection, view, chain, task)
                documents = _render(view, await chains.step_rows(chain_id), after=0)
        # Awaited once the connection is back: on SQLite the writer needs that one connection.
        await audited
        return ChainRead(chain, children, documents)

    async def steps(self, caller: Caller, chain_id: UUID, *, after: int, limit: int) -> StepsRead:
        """Steps `after + 1 … after + limit` as this caller sees them (hidden ones left out,
        so a page may hold fewer), and where the next page starts."""
        view = caller.view(self.runs.tool_sensitive_fields)
        async with self.database.read() as connection:
            chains = ChainRepository(connection, caller.tenant_id)
            chain = await _find_chain(chains, chain_id)
            audited = self._audit(caller, chain, view, AuditAction.CHAIN_READ, after, limit)
            if view.full_access:
                documents = await chains.step_documents(chain_id, after=after, limit=limit + 1)
                more = len(documents) > limit
                documents = documents[:limit]
            else:
                await _learn_earlier_turns(connection, view, chain)
                rows = await chains.step_rows(chain_id, after=after, limit=limit + 1)
                more = len(rows) > limit
                # The secrets of earlier steps must be known to mask this page, and the tool
                # steps it withholds, which the page's prompts may repeat; only those steps can
                # teach the view anything: the database picks them out.
                earlier = await chains.step_rows(
                    chain_id, through=after, holding=view.learning_needles, or_tool_steps=True
                )
                documents = _render(view, [*earlier, *rows[:limit]], after=after)
        await audited
        return StepsRead(documents, after + limit if more else None)

    async def page(
        self,
        tenant: Tenant,
        *,
        status: ChainStatus | None,
        agent: str | None,
        started_from: datetime | None,
        started_to: datetime | None,
        cursor: str | None,
        limit: int,
    ) -> Page[ChainRecord]:
        """The tenant's chains, newest first, started in `[started_from, started_to)`; `agent`
        is a name (any of its versions) or `name@N` (that version)."""
        async with self.database.read() as connection:
            return await ChainRepository(connection, tenant.id).page(
                status=status,
                agent_id=agent,
                started_from=started_from,
                started_to=started_to,
                cursor=Cursor.decode(cursor) if cursor else None,
                limit=limit,
            )

    def _audit(
        self,
        caller: Caller,
        chain: ChainRecord,
        view: ReaderView,
        action: AuditAction,
        after: int | None = None,
        limit: int | None = None,
    ) -> asyncio.Future[None]:
        """Stores the read's audit row while the steps are read (it is awaited before they
        are served)."""
        page = {} if after is None else {"after": after, "limit": limit}
        row = chain_read(
            caller, action=action, chain_id=chain.id, task_id=chain.task_id, view=view, **page
        )
        return asyncio.ensure_future(self.runs.record_audit([row]))


def _render(view: ReaderView, rows: list[StepRow], *, after: int) -> list[str]:
    documents: list[str] = []
    transparent = view.transparent
    for step_number, document, step_type, tool_type, tool_name, level in rows:
        # Once a tool step is withheld, the LLM calls after it may repeat it in their prompts.
        if transparent and level == "full" and not view.withholds:
            if step_number > after:
                documents.append(document)
            continue
        facts = step_facts(step_type, tool_type, tool_name, level)
        if step_number <= after:
            view.learn(document, facts)
            continue
        rendered = view.render(document, facts)
        if rendered is not None:
            documents.append(rendered)
    return documents


async def _learn_earlier_turns(
    connection: AsyncConnection,
    view: ReaderView,
    chain: ChainRecord,
    task: TaskRecord | None = None,
) -> None:
    if task is None:
        task = await TaskRepository(connection, chain.tenant_id).get(chain.task_id)
    await learn_earlier_turns(connection, view, task)


async def _find_chain(chains: ChainRepository, chain_id: UUID) -> ChainRecord:
    chain = await chains.get(chain_id)
    if chain is None:
        raise NotFound("chain", chain_id)
    return chain
