"""Conversations and their turns (the tasks naming them), within one tenant."""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import Select, Text, and_, case, cast, delete, insert, select

from app.chain import TaskState
from app.ids import uuid4
from app.storage.pagination import Cursor, Page
from app.storage.records import ConversationRecord, TaskRecord
from app.storage.repository import TenantScoped
from app.storage.tables import conversations, reasoning_steps, tasks
from app.storage.tasks import TaskRepository


@dataclass(frozen=True, slots=True)
class StoredTurn:
    turn: int
    task_id: UUID
    status: TaskState
    request: dict[str, Any]
    steps: Sequence[dict[str, Any]]


# The steps a conversation's history is rebuilt from (thinking steps add nothing to it).
_HISTORY_STEPS = ("tool_call", "tool_result", "synthesis")


class ConversationRepository(TenantScoped):
    def _select(self) -> Select[Any]:
        return select(conversations).where(conversations.c.tenant_id == self.tenant_id)

    async def create(
        self,
        *,
        user_id: str,
        agent_name: str,
        agent_version: int | None,
        metadata: dict[str, Any],
        file_ids: Sequence[UUID] = (),
        at: datetime,
    ) -> ConversationRecord:
        values: dict[str, Any] = {
            "id": uuid4(),
            "tenant_id": self.tenant_id,
            "user_id": user_id,
            "agent_name": agent_name,
            "agent_version": agent_version,
            "metadata": metadata,
            "turns": 0,
            "file_ids": [str(file_id) for file_id in file_ids] or None,
            "created_at": at,
            "updated_at": at,
        }
        await self.connection.execute(insert(conversations).values(**values))
        return ConversationRecord.model_validate(values)

    async def discard_unused(self, conversation_id: UUID) -> bool:
        """Deletes the conversation if no task names it (one made for a turn that was then
        refused); whether it did."""
        c = conversations.c
        used = select(tasks.c.id).where(
            tasks.c.tenant_id == self.tenant_id, tasks.c.conversation_id == conversation_id
        )
        statement = delete(conversations).where(
            c.tenant_id == self.tenant_id, c.id == conversation_id, ~used.exists()
        )
        result = await self.connection.execute(statement)
        return bool(result.rowcount)

    async def get(self, conversation_id: UUID) -> ConversationRecord | None:
        statement = self._select().where(conversations.c.id == conversation_id)
        row = (await self.connection.execute(statement)).first()
        return None if row is None else ConversationRecord.model_validate(row._mapping)

    async def page(
        self, *, cursor: Cursor | None, limit: int, user_id: str | None = None
    ) -> Page[ConversationRecord]:
        """Newest first; only `user_id`'s with it."""
        c = conversations.c
        statement = self._select()
        if user_id is not None:
            statement = statement.where(c.user_id == user_id)
        if cursor is not None:
            statement = statement.where(cursor.before(c.created_at, c.id))
        statement = statement.order_by(c.created_at.desc(), c.id.desc()).limit(limit + 1)
        rows = (await self.connection.execute(statement)).all()
        fetched = [ConversationRecord.model_validate(row._mapping) for row in rows]
        return Page.of(fetched, limit, lambda item: Cursor(item.created_at, item.id))

    async def turns(self, conversation_id: UUID) -> list[TaskRecord]:
        """The conversation's turns (its tasks), in order."""
        statement = (
            TaskRepository(self.connection, self.tenant_id)
            .select()
            .where(tasks.c.conversation_id == conversation_id)
            .order_by(tasks.c.turn)
        )
        rows = (await self.connection.execute(statement)).all()
        return [TaskRecord.model_validate(row._mapping) for row in rows]

    async def history(self, conversation_id: UUID, *, after_turn: int = 0) -> list[StoredTurn]:
        """Each turn's number, state, stored request and history steps (decoded, in step
        order), from turn `after_turn + 1` on: what `app.agents.history.turn_messages`
        rebuilds the conversation from. Two queries, however many turns."""
        t, s = tasks.c, reasoning_steps.c
        turn_rows = (
            await self.connection.execute(
                select(t.turn, t.id, t.status, t.request, t.chain_id)
                .where(
                    t.tenant_id == self.tenant_id,
                    t.conversation_id == conversation_id,
                    t.turn > after_turn,
                )
                .order_by(t.turn)
            )
        ).all()
        if not turn_rows:
            return []
        chain_ids = (
            select(t.chain_id)
            .where(
                t.tenant_id == self.tenant_id,
                t.conversation_id == conversation_id,
                t.turn > after_turn,
            )
            .scalar_subquery()
        )
        # An LLM call step holds the whole prompt, which the history does not need: only its
        # correlation id and purpose are read, in the database.
        llm_call = and_(s.type == "tool_call", s.tool_type == "llm")
        call = s.data["tool_call"]
        step_rows = (
            await self.connection.execute(
                select(
                    s.chain_id,
                    case((llm_call, None), else_=cast(s.data, Text)),
                    call["correlation_id"].as_string(),
                    call["arguments"]["purpose"].as_string(),
                )
                .where(
                    s.tenant_id == self.tenant_id,
                    s.chain_id.in_(chain_ids),
                    s.type.in_(_HISTORY_STEPS),
                )
                .order_by(s.chain_id, s.step_number)
            )
        ).all()
        steps: dict[UUID, list[dict[str, Any]]] = {}
        for chain_id, document, correlation_id, purpose in step_rows:
            if document is None:
                arguments = {} if purpose is None else {"purpose": purpose}
                step = {
                    "type": "tool_call",
                    "tool_call": {
                        "tool_type": "llm",
                        "correlation_id": correlation_id,
                        "arguments": arguments,
                    },
                }
            else:
                step = json.loads(document)
            steps.setdefault(chain_id, []).append(step)
        return [
            StoredTurn(
                row.turn, row.id, TaskState(row.status), row.request, steps.get(row.chain_id, [])
            )
            for row in turn_rows
        ]
