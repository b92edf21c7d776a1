"""A conversation's history for its next turn, rebuilt from the stored chains of its turns and
kept per conversation: a turn's history is the previous turn's plus that turn, so a process
that served the previous turn reads only the newest one; another process rebuilds it whole
once."""

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.agents.history import turn_messages
from app.resources.conversations.store import ConversationRepository


@dataclass(frozen=True, slots=True)
class History:
    turns: int
    messages: list[dict[str, Any]]
    # A turn still running: the history is not final (and a new turn would be refused).
    running: UUID | None = None


class ConversationHistories:
    """The latest history of the conversations this process served lately (at most
    `capacity`, least recently used dropped). Only finished turns are ever part of a
    history: a turn is added once its task has ended, which is also when the next turn can
    be submitted."""

    def __init__(self, capacity: int = 1024) -> None:
        self._capacity = capacity
        self._cache: OrderedDict[UUID, History] = OrderedDict()

    async def history(
        self, connection: AsyncConnection, tenant_id: str, conversation_id: UUID, turns: int
    ) -> History:
        """The history of the conversation's first `turns` turns."""
        cached = self._cache.get(conversation_id)
        if cached is not None and cached.turns == turns:
            self._cache.move_to_end(conversation_id)
            return cached
        if cached is not None and cached.turns < turns:
            newer = await rebuild(connection, tenant_id, conversation_id, after=cached)
            history = History(newer.turns, [*cached.messages, *newer.messages], newer.running)
        else:
            history = await rebuild(connection, tenant_id, conversation_id)
        if history.turns == turns and history.running is None:
            self._remember(conversation_id, history)
        return history

    def forget(self, conversation_id: UUID) -> None:
        self._cache.pop(conversation_id, None)

    def _remember(self, conversation_id: UUID, history: History) -> None:
        self._cache[conversation_id] = history
        self._cache.move_to_end(conversation_id)
        while len(self._cache) > self._capacity:
            self._cache.popitem(last=False)


async def rebuild(
    connection: AsyncConnection,
    tenant_id: str,
    conversation_id: UUID,
    *,
    after: History | None = None,
) -> History:
    """The history from the database: whole, or only the turns after those of `after` (its
    `turns` then counts them all)."""
    done = 0 if after is None else after.turns
    turns = await ConversationRepository(connection, tenant_id).history(
        conversation_id, after_turn=done
    )
    messages: list[dict[str, Any]] = []
    for turn in turns:
        messages.extend(turn_messages(turn.request, turn.steps))
    running = next((t.task_id for t in turns if not t.status.is_terminal), None)
    return History(done + len(turns), messages, running)


async def history_before(
    connection: AsyncConnection, tenant_id: str, conversation_id: UUID, turn: int
) -> list[dict[str, Any]]:
    """The messages of the conversation's turns before turn `turn`: what that turn's run
    started from (rebuilt when it is resumed)."""
    turns = await ConversationRepository(connection, tenant_id).history(conversation_id)
    messages: list[dict[str, Any]] = []
    for stored in turns:
        if stored.turn < turn:
            messages.extend(turn_messages(stored.request, stored.steps))
    return messages
