"""Chain reads on behalf of a caller: within its tenant, as its view shows them, audited in
the same transaction as the read."""

import asyncio
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.api.chains.schemas import ChainDocument, ChainSummary, with_steps
from app.api.state import AppState
from app.governance.audit import AuditAction
from app.governance.auditing import chain_read
from app.governance.callers import Caller
from app.runs.earlier_turns import learn_earlier_turns
from app.runs.errors import NotFound
from app.runs.recorder import step_facts
from app.security.visibility import ReaderView
from app.storage.chains import ChainRepository, StepRow
from app.storage.records import ChainRecord, TaskRecord
from app.storage.tasks import TaskRepository


async def chain_document(
    state: AppState,
    caller: Caller,
    *,
    chain_id: UUID | None = None,
    task_id: UUID | None = None,
    action: AuditAction = AuditAction.CHAIN_READ,
) -> bytes:
    """A chain with its steps (by its id or its task's), rendered as JSON for this caller;
    audited as `action`."""
    view = caller.view(state.runs.tool_sensitive_fields)
    task: TaskRecord | None = None
    async with state.database.read() as connection:
        chains = ChainRepository(connection, caller.tenant_id)
        if task_id is not None:
            task = await TaskRepository(connection, caller.tenant_id).get(task_id)
            if task is None:
                raise NotFound("task", task_id)
            chain_id = task.chain_id
        assert chain_id is not None
        chain = await _find_chain(chains, chain_id)
        children = await chains.child_ids(chain_id)
        audited = _audit(state, caller, chain, view, action)
        if view.full_access:
            documents = await chains.step_documents(chain_id)
        else:
            await _learn_earlier_turns(connection, view, chain, task)
            documents = _render(view, await chains.step_rows(chain_id), after=0)
    # Awaited once the connection is back: on SQLite the writer needs that one connection.
    await audited
    envelope = ChainDocument(**ChainSummary.of(chain).model_dump(), child_chain_ids=children)
    return with_steps(envelope, "steps", documents)


async def step_page(
    state: AppState, caller: Caller, chain_id: UUID, *, after: int, limit: int
) -> bytes:
    """Steps `after + 1 … after + limit` as this caller sees them (hidden ones left out, so
    a page may hold fewer), and where the next page starts."""
    view = caller.view(state.runs.tool_sensitive_fields)
    async with state.database.read() as connection:
        chains = ChainRepository(connection, caller.tenant_id)
        chain = await _find_chain(chains, chain_id)
        audited = _audit(state, caller, chain, view, AuditAction.CHAIN_READ, after, limit)
        if view.full_access:
            documents = await chains.step_documents(chain_id, after=after, limit=limit + 1)
            more = len(documents) > limit
            documents = documents[:limit]
        else:
            await _learn_earlier_turns(connection, view, chain)
            rows = await chains.step_rows(chain_id, after=after, limit=limit + 1)
            more = len(rows) > limit
            # The secrets of earlier steps must be known to mask this page, and the tool steps
            # it withholds, which the page's prompts may repeat; only those steps can teach the
            # view anything: the database picks them out.
            earlier = await chains.step_rows(
                chain_id, through=after, holding=view.learning_needles, or_tool_steps=True
            )
            documents = _render(view, [*earlier, *rows[:limit]], after=after)
    await audited
    next_after = after + limit if more else None
    tail = f',"next_after":{"null" if next_after is None else next_after}'
    return f'{{"items":[{",".join(documents)}]{tail}}}'.encode()


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


def _audit(
    state: AppState,
    caller: Caller,
    chain: ChainRecord,
    view: ReaderView,
    action: AuditAction,
    after: int | None = None,
    limit: int | None = None,
) -> asyncio.Future[None]:
    """Stores the read's audit row while the steps are read (it is awaited before they are
    served)."""
    page = {} if after is None else {"after": after, "limit": limit}
    row = chain_read(
        caller, action=action, chain_id=chain.id, task_id=chain.task_id, view=view, **page
    )
    return asyncio.ensure_future(state.runs.record_audit([row]))


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
