"""A tenant's conversations on behalf of a caller: started with an agent, listed, read with
their turns. A turn is a task; the task service adds them."""

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain.models import utc_now
from app.errors import NotFound
from app.governance.callers import Caller
from app.resources.conversations.store import ConversationRepository
from app.storage.database import Database
from app.storage.pagination import Cursor, Page
from app.storage.records import ConversationRecord, TaskRecord


class AgentVersion(Protocol):
    """The agent version a reference names."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...


AgentLookup = Callable[[AsyncConnection, str, str | None], Awaitable[AgentVersion]]
"""The agent version a reference (`name`, `name@N`, None for the built-in agent) names in a
tenant, read on the given connection; it raises what makes the reference unusable (an
unknown or archived agent)."""


@dataclass(frozen=True, slots=True)
class ConversationService:
    """The conversations of a caller's tenant; `agents` resolves the agent one talks to."""

    database: Database
    agents: AgentLookup

    async def start(
        self,
        caller: Caller,
        *,
        agent: str | None,
        metadata: dict[str, Any],
        file_ids: Sequence[UUID] = (),
    ) -> ConversationRecord:
        """A new conversation of the caller with `agent`: each turn runs its newest version,
        or version N for `name@N`. `file_ids` are files of the tenant every turn may read
        (checked by whoever gives them)."""
        async with self.database.transaction() as connection:
            resolved = await self.agents(connection, caller.tenant_id, agent)
            pinned = agent is not None and "@" in agent
            return await ConversationRepository(connection, caller.tenant_id).create(
                user_id=caller.subject,
                agent_name=resolved.name,
                agent_version=resolved.version if pinned else None,
                metadata=metadata,
                file_ids=file_ids,
                at=utc_now(),
            )

    async def page(
        self, caller: Caller, *, cursor: Cursor | None, limit: int
    ) -> Page[ConversationRecord]:
        """The tenant's conversations, newest first."""
        async with self.database.read() as connection:
            repository = ConversationRepository(connection, caller.tenant_id)
            return await repository.page(cursor=cursor, limit=limit)

    async def with_turns(
        self, caller: Caller, conversation_id: UUID
    ) -> tuple[ConversationRecord, list[TaskRecord]]:
        """The conversation and its turns (its tasks), in order."""
        async with self.database.read() as connection:
            repository = ConversationRepository(connection, caller.tenant_id)
            record = await repository.get(conversation_id)
            if record is None:
                raise NotFound("conversation", conversation_id)
            return record, await repository.turns(conversation_id)

    async def discard_unused(self, caller: Caller, conversation_id: UUID) -> bool:
        """Deletes the conversation if no task names it (one started for a turn that was
        then refused); whether it did."""
        async with self.database.transaction() as connection:
            repository = ConversationRepository(connection, caller.tenant_id)
            return await repository.discard_unused(conversation_id)
