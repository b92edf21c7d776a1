"""Chains and their steps, read and listed within one tenant."""

from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import Select, Text, cast, select

from app.chain import ChainStatus
from app.storage.pagination import Cursor, Page
from app.storage.records import ChainRecord
from app.storage.repository import TenantScoped
from app.storage.tables import reasoning_chains, reasoning_steps


class ChainRepository(TenantScoped):
    def _select(self) -> Select[Any]:
        return select(reasoning_chains).where(reasoning_chains.c.tenant_id == self.tenant_id)

    async def get(self, chain_id: UUID) -> ChainRecord | None:
        statement = self._select().where(reasoning_chains.c.id == chain_id)
        row = (await self.connection.execute(statement)).first()
        return None if row is None else ChainRecord.model_validate(row._mapping)

    async def page(
        self,
        *,
        status: ChainStatus | None,
        agent_id: str | None,
        started_from: datetime | None,
        started_to: datetime | None,
        cursor: Cursor | None,
        limit: int,
    ) -> Page[ChainRecord]:
        c = reasoning_chains.c
        statement = self._select()
        if status is not None:
            statement = statement.where(c.status == status)
        if agent_id is not None:
            statement = statement.where(c.agent_id == agent_id)
        if started_from is not None:
            statement = statement.where(c.started_at >= started_from)
        if started_to is not None:
            statement = statement.where(c.started_at < started_to)
        if cursor is not None:
            statement = statement.where(cursor.before(c.started_at, c.id))
        statement = statement.order_by(c.started_at.desc(), c.id.desc()).limit(limit + 1)
        rows = (await self.connection.execute(statement)).all()
        fetched = [ChainRecord.model_validate(row._mapping) for row in rows]
        return Page.of(fetched, limit, lambda chain: Cursor(chain.started_at, chain.id))

    async def get_by_task(self, task_id: UUID) -> ChainRecord | None:
        statement = self._select().where(
            reasoning_chains.c.task_id == task_id, reasoning_chains.c.parent_chain_id.is_(None)
        )
        row = (await self.connection.execute(statement)).first()
        return None if row is None else ChainRecord.model_validate(row._mapping)

    async def step_documents(
        self, chain_id: UUID, *, after: int = 0, limit: int | None = None
    ) -> list[str]:
        """The chain's steps in order, as stored JSON text (not decoded and re-encoded: a
        1,000-step chain is served as is)."""
        s = reasoning_steps.c
        statement = (
            select(cast(s.data, Text))
            .where(s.tenant_id == self.tenant_id, s.chain_id == chain_id, s.step_number > after)
            .order_by(s.step_number)
        )
        if limit is not None:
            statement = statement.limit(limit)
        return list((await self.connection.execute(statement)).scalars())

    async def step_rows(
        self, chain_id: UUID, *, upto: int | None = None
    ) -> list[tuple[int, str, str, str | None, str | None, str]]:
        """The chain's steps in order up to step `upto` (all by default), each as (step
        number, stored JSON text, type, tool type, tool name, stored visibility level): what
        a filtered view renders from."""
        s = reasoning_steps.c
        statement = (
            select(
                s.step_number, cast(s.data, Text), s.type, s.tool_type, s.tool_name, s.visibility
            )
            .where(s.tenant_id == self.tenant_id, s.chain_id == chain_id)
            .order_by(s.step_number)
        )
        if upto is not None:
            statement = statement.where(s.step_number <= upto)
        rows = (await self.connection.execute(statement)).all()
        return [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]
