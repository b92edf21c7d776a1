"""The asyncio client: `AsyncOmniForge`, the same calls as `OmniForge`, awaited. Every call
is built by `_core`; this only sends it."""

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import date, datetime
from types import TracebackType
from typing import Any, Self, TypeVar, Unpack

import httpx

from omniforge_client import _core
from omniforge_client._core import Call, Id, StreamFollower
from omniforge_client.events import StreamEvent
from omniforge_client.inputs import AgentChanges, AgentDefinition, TaskOptions, TurnOptions
from omniforge_client.models import (
    Agent,
    ApiModel,
    Chain,
    Conversation,
    ConversationDetail,
    CostOrder,
    CostReport,
    GroupBy,
    Me,
    Page,
    Task,
    TaskAccepted,
    TaskCosts,
    TaskState,
    Tool,
    UsageReport,
)

T = TypeVar("T")
ItemT = TypeVar("ItemT", bound=ApiModel)


class _Resource:
    def __init__(self, client: "AsyncOmniForge") -> None:
        self._client = client


class AsyncTasks(_Resource):
    async def create(
        self,
        input: str | None = None,
        *,
        messages: Sequence[Mapping[str, Any]] | None = None,
        idempotency_key: str | None = None,
        **options: Unpack[TaskOptions],
    ) -> TaskAccepted:
        """Submits a task (a text `input` or chat `messages`); it runs on the service. With
        `idempotency_key`, a retry with the same key and task answers with the task the first
        made (within 24 h) instead of starting another."""
        return await self._client.send(_core.submit_task(input, messages, options, idempotency_key))

    async def get(self, task_id: Id) -> Task:
        return await self._client.send(_core.get_task(task_id))

    def list(
        self,
        *,
        status: TaskState | None = None,
        agent: str | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[Task]:
        """The tenant's tasks (of `agent` only, if given), newest first, fetched page by page
        as they are iterated."""
        return self._client.paginate(
            lambda cursor: _core.list_tasks(cursor, status, agent, page_size)
        )

    async def cancel(self, task_id: Id) -> Task:
        """Stops the run; a task that already finished raises `TaskFinished`."""
        return await self._client.send(_core.cancel_task(task_id))

    async def chain(self, task_id: Id) -> Chain:
        """The task's reasoning chain with every step the caller may see."""
        return await self._client.send(_core.task_chain(task_id))

    async def costs(self, task_id: Id) -> TaskCosts:
        return await self._client.send(_core.task_costs(task_id))

    def stream(self, task_id: Id, *, after: int | None = None) -> AsyncIterator[StreamEvent]:
        """The task's events from the start (or after event id `after`) until `done`.
        A connection that drops is resumed from the last event received, so that every
        stored event comes once, in order."""
        return self._client.follow(task_id, after)

    async def wait(self, task_id: Id) -> Task:
        """Follows the task's stream until it ends; the finished task."""
        async for _ in self.stream(task_id):
            pass
        return await self.get(task_id)


class AsyncConversations(_Resource):
    async def create(
        self,
        *,
        agent: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        file_ids: Sequence[Id] | None = None,
    ) -> Conversation:
        return await self._client.send(_core.start_conversation(agent, metadata, file_ids))

    async def get(self, conversation_id: Id) -> ConversationDetail:
        """The conversation with its turns, in order, and their totals."""
        return await self._client.send(_core.get_conversation(conversation_id))

    def list(self, *, page_size: int | None = None) -> AsyncIterator[Conversation]:
        return self._client.paginate(lambda cursor: _core.list_conversations(cursor, page_size))

    async def send(
        self,
        conversation_id: Id,
        input: str | None = None,
        *,
        messages: Sequence[Mapping[str, Any]] | None = None,
        **options: Unpack[TurnOptions],
    ) -> TaskAccepted:
        """Submits the next turn: a task whose run starts from every earlier turn."""
        return await self._client.send(_core.send_turn(conversation_id, input, messages, options))


class AsyncAgents(_Resource):
    async def create(self, name: str, **definition: Unpack[AgentDefinition]) -> Agent:
        """Defines the agent: its version 1."""
        return await self._client.send(_core.create_agent(name, definition))

    async def get(self, name: str, *, version: int | None = None) -> Agent:
        """Its newest version, or the version asked for."""
        return await self._client.send(_core.get_agent(name, version))

    def list(self, *, archived: bool = False, page_size: int | None = None) -> AsyncIterator[Agent]:
        return self._client.paginate(lambda cursor: _core.list_agents(cursor, archived, page_size))

    async def update(self, name: str, **changes: Unpack[AgentChanges]) -> Agent:
        """A new version with these changes (`None` resets a field); none if nothing changes."""
        return await self._client.send(_core.update_agent(name, changes))

    def versions(self, name: str, *, page_size: int | None = None) -> AsyncIterator[Agent]:
        """Its versions, newest first."""
        return self._client.paginate(lambda cursor: _core.agent_versions(name, cursor, page_size))

    async def archive(self, name: str) -> None:
        await self._client.send(_core.archive_agent(name))


class AsyncTools(_Resource):
    async def list(self) -> "list[Tool]":
        """The tenant's tools, and whether the caller may use each."""
        return await self._client.send(_core.list_tools())


class AsyncCosts(_Resource):
    async def report(
        self,
        tenant_id: str,
        *,
        since: datetime | date | None = None,
        until: datetime | date | None = None,
        group_by: GroupBy | None = None,
        split_by: GroupBy | None = None,
        order: CostOrder | None = None,
        limit: int | None = None,
    ) -> CostReport:
        """The tenant's costs from `since` (inclusive) to `until` (exclusive), grouped (and
        split within each group by `split_by`; `order="cost"`: the costliest first)."""
        return await self._client.send(
            _core.cost_report(tenant_id, since, until, group_by, limit, split_by, order)
        )

    async def usage(
        self, tenant_id: str, *, since: date | None = None, until: date | None = None
    ) -> UsageReport:
        """The daily model-usage roll-up."""
        return await self._client.send(_core.usage_report(tenant_id, since, until))


class AsyncOmniForge:
    """An asyncio client of an OmniForge service: `AsyncOmniForge(url, api_key=...)` (or
    `token=` for a JWT). Close it (`aclose`), or use it as an async context manager."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        stream_retries: int = 5,
        stream_backoff_s: float = 0.25,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.options = _core.options(
            base_url,
            api_key=api_key,
            token=token,
            timeout=timeout,
            stream_retries=stream_retries,
            stream_backoff_s=stream_backoff_s,
            headers=headers,
        )
        self._http = httpx.AsyncClient(
            base_url=self.options.base_url,
            headers=self.options.headers,
            timeout=timeout,
            transport=transport,
        )
        self.tasks = AsyncTasks(self)
        self.conversations = AsyncConversations(self)
        self.agents = AsyncAgents(self)
        self.tools = AsyncTools(self)
        self.costs = AsyncCosts(self)

    async def me(self) -> Me:
        """Who the caller is: its tenant, roles and permissions, and the key it used."""
        return await self.send(_core.me())

    async def send(self, call: Call[T]) -> T:
        response = await self._http.request(
            call.method, call.path, params=call.params, json=call.body, headers=call.headers
        )
        return call.result(response)

    async def paginate(
        self, page: Callable[[str | None], Call[Page[ItemT]]]
    ) -> AsyncIterator[ItemT]:
        cursor: str | None = None
        while True:
            current = await self.send(page(cursor))
            for item in current.items:
                yield item
            if current.next_cursor is None:
                return
            cursor = current.next_cursor

    async def follow(self, task_id: Id, after: int | None) -> AsyncIterator[StreamEvent]:
        follower = StreamFollower(
            task_id, after, self.options.stream_retries, self.options.stream_backoff_s
        )
        while not follower.finished:
            cause: BaseException | None = None
            try:
                async with self._http.stream(
                    "GET", follower.path, headers=follower.headers()
                ) as response:
                    if response.is_error:
                        await response.aread()
                    if follower.opened(response):
                        async for line in response.aiter_lines():
                            event = follower.line(line)

                            if event is None:
                                continue

                            yield event

                            if event.type == "done":
                                return
            except _core.RETRYABLE as exc:
                cause = exc
            if not follower.finished:
                await asyncio.sleep(follower.broke_off(cause))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
