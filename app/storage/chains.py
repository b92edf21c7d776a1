"""Chains and their steps, read and listed within one tenant."""

from collections.abc import Collection
from datetime import datetime
from string import ascii_lowercase, ascii_uppercase
from typing import Any
from uuid import UUID

from sqlalchemy import (
    ColumnElement,
    Select,
    Text,
    and_,
    any_,
    bindparam,
    cast,
    func,
    or_,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY

from app.chain import ChainStatus, ToolType
from app.storage.pagination import Cursor, Page
from app.storage.records import ChainRecord
from app.storage.repository import TenantScoped
from app.storage.tables import reasoning_chains, reasoning_steps

# A stored step as a filtered view renders it: (step number, stored JSON text, type, tool
# type, tool name, stored visibility level).
StepRow = tuple[int, str, str, str | None, str | None, str]


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
            # `name` matches every version of the agent (`name@N`), `name@N` that one.
            matches = c.agent_id == agent_id
            if "@" not in agent_id:
                matches = or_(matches, c.agent_id.startswith(f"{agent_id}@", autoescape=True))
            statement = statement.where(matches)
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

    async def child_ids(self, chain_id: UUID) -> list[UUID]:
        """The chains of the sub-agents' tasks the chain's calls started, oldest first."""
        c = reasoning_chains.c
        statement = (
            select(c.id)
            .where(c.tenant_id == self.tenant_id, c.parent_chain_id == chain_id)
            .order_by(c.started_at, c.id)
        )
        return list((await self.connection.scalars(statement)).all())

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
        self,
        chain_id: UUID,
        *,
        after: int = 0,
        through: int | None = None,
        limit: int | None = None,
        holding: Collection[str] | None = None,
        or_tool_steps: bool = False,
    ) -> list[StepRow]:
        """The chain's steps in order after step `after`, up to step `through` and at most
        `limit` of them, each as (step number, stored JSON text, type, tool type, tool name,
        stored visibility level): what a filtered view renders from.

        With `holding`, only the steps whose stored JSON text, its ASCII letters lowered,
        holds one of these strings (none when it is empty), and with `or_tool_steps` also the
        steps of every tool but the LLM: the database does the search, so the steps that
        cannot matter are never sent."""
        if through is not None and through <= after:
            return []
        if holding is not None and not holding and not or_tool_steps:
            return []
        s = reasoning_steps.c
        text = cast(s.data, Text)
        statement = (
            select(s.step_number, text, s.type, s.tool_type, s.tool_name, s.visibility)
            .where(s.tenant_id == self.tenant_id, s.chain_id == chain_id, s.step_number > after)
            .order_by(s.step_number)
        )
        if through is not None:
            statement = statement.where(s.step_number <= through)
        if holding is not None:
            wanted = [self._holds_any(text, holding)] if holding else []
            if or_tool_steps:
                wanted.append(and_(s.tool_type.is_not(None), s.tool_type != ToolType.LLM.value))
            statement = statement.where(or_(*wanted))
        if limit is not None:
            statement = statement.limit(limit)
        rows = (await self.connection.execute(statement)).all()
        return [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    def _holds_any(self, text: ColumnElement[str], needles: Collection[str]) -> ColumnElement[bool]:
        """Whether `text`, its ASCII letters lowered, holds one of the (lowercase) `needles`."""
        patterns = sorted(f"%{_like_escaped(needle)}%" for needle in needles)
        if self.connection.dialect.name == "postgresql":
            # Lowered by `translate`, not `lower` or ILIKE: those follow the database's locale
            # (in a Turkish one, "I" lowers to "ı"). Lowered once per row, whatever the number
            # of patterns.
            lowered = func.translate(text, ascii_uppercase, ascii_lowercase)
            return lowered.like(any_(bindparam("needles", patterns, type_=ARRAY(Text))))
        # SQLite's LIKE ignores the case of ASCII letters, and of those only.
        return or_(*(text.like(pattern, escape="\\") for pattern in patterns))


def _like_escaped(needle: str) -> str:
    """`needle` as a LIKE pattern matching itself, `\\` escaping (Postgres's default)."""
    return needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
