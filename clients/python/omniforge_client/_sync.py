"""The blocking client: `OmniForge`. Every call is built by `_core`; this only sends it."""

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
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
    def __init__(self, client: "OmniForge") -> None:
        self._client = client


class Tasks(_Resource):
    def create(
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
        return self._client.send(_core.submit_task(input, messages, options, idempotency_key))

    def get(self, task_id: Id) -> Task:
        return self._client.send(_core.get_task(task_id))

    def list(
        self,
        *,
        status: TaskState | None = None,
        agent: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Task]:
        """The tenant's tasks (of `agent` only, if given), newest first, fetched page by page
        as they are iterated."""
        return self._client.paginate(
            lambda cursor: _core.list_tasks(cursor, status, agent, page_size)
        )

    def cancel(self, task_id: Id) -> Task:
        """Stops the run; a task that already finished raises `TaskFinished`."""
        return self._client.send(_core.cancel_task(task_id))

    def chain(self, task_id: Id) -> Chain:
        """The task's reasoning chain with every step the caller may see."""
        return self._client.send(_core.task_chain(task_id))

    def costs(self, task_id: Id) -> TaskCosts:
        return self._client.send(_core.task_costs(task_id))

    def stream(self, task_id: Id, *, after: int | None = None) -> Iterator[StreamEvent]:
        """The task's events from the start (or after event id `after`) until `done`.
        A connection that drops is resumed from the last event received, so that every
        stored event comes once, in order."""
        return self._client.follow(task_id, after)

    def wait(self, task_id: Id) -> Task:
        """Follows the task's stream until it ends; the finished task."""
        for _ in self.stream(task_id):
            pass
        return self.get(task_id)


class Conversations(_Resource):
    def create(
        self,
        *,
        agent: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        file_ids: Sequence[Id] | None = None,
    ) -> Conversation:
        return self._client.send(_core.start_conversation(agent, metadata, file_ids))

    def get(self, conversation_id: Id) -> ConversationDetail:
        """The conversation with its turns, in order, and their totals."""
        return self._client.send(_core.get_conversation(conversation_id))

    def list(self, *, page_size: int | None = None) -> Iterator[Conversation]:
        return self._client.paginate(lambda cursor: _core.list_conversations(cursor, page_size))

    def send(
        self,
        conversation_id: Id,
        input: str | None = None,
        *,
        messages: Sequence[Mapping[str, Any]] | None = None,
        **options: Unpack[TurnOptions],
    ) -> TaskAccepted:
        """Submits the next turn: a task whose run starts from every earlier turn."""
        return self._client.send(_core.send_turn(conversation_id, input, messages, options))


class Agents(_Resource):
    def create(self, name: str, **definition: Unpack[AgentDefinition]) -> Agent:
        """Defines the agent: its version 1."""
        return self._client.send(_core.create_agent(name, definition))

    def get(self, name: str, *, version: int | None = None) -> Agent:
        """Its newest version, or the version asked for."""
        return self._client.send(_core.get_agent(name, version))

    def list(self, *, archived: bool = False, page_size: int | None = None) -> Iterator[Agent]:
        return self._client.paginate(lambda cursor: _core.list_agents(cursor, archived, page_size))

    def update(self, name: str, **changes: Unpack[AgentChanges]) -> Agent:
        """A new version with these changes (`None` resets a field); none if nothing changes."""
        return self._client.send(_core.update_agent(name, changes))

    def versions(self, name: str, *, page_size: int | None = None) -> Iterator[Agent]:
        """Its versions, newest first."""
        return self._client.paginate(lambda cursor: _core.agent_versions(name, cursor, page_size))

    def archive(self, name: str) -> None:
        self._client.send(_core.archive_agent(name))


class Tools(_Resource):
    def list(self) -> list[Tool]:
        """The tenant's tools, and whether the caller may use each."""
        return self._client.send(_core.list_tools())


class Costs(_Resource):
    def report(
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
        return self._client.send(
            _core.cost_report(tenant_id, since, until, group_by, limit, split_by, order)
        )

    def usage(
        self, tenant_id: str, *, since: date | None = None, until: date | None = None
    ) -> UsageReport:
        """The daily model-usage roll-up."""
        return self._client.send(_core.usage_report(tenant_id, since, until))


class OmniForge:
    """A blocking client of an OmniForge service: `OmniForge(url, api_key=...)` (or
    `token=` for a JWT). Close it, or use it as a context manager."""

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
        transport: httpx.BaseTransport | None = None,
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
        self._http = httpx.Client(
            base_url=self.options.base_url,
            headers=self.options.headers,
            timeout=timeout,
            transport=transport,
        )
        self.tasks = Tasks(self)
        self.conversations = Conversations(self)
        self.agents = Agents(self)
        self.tools = Tools(self)
        self.costs = Costs(self)

    def me(self) -> Me:
        """Who the caller is: its tenant, roles and permissions, and the key it used."""
        return self.send(_core.me())

    def send(self, call: Call[T]) -> T:
        response = self._http.request(
            call.method, call.path, params=call.params, json=call.body, headers=call.headers
        )
        return call.result(response)

    def paginate(self, page: Callable[[str | None], Call[Page[ItemT]]]) -> Iterator[ItemT]:
        cursor: str | None = None
        while True:
            current = self.send(page(cursor))
            yield from current.items
            if current.next_cursor is None:
                return
            cursor = current.next_cursor

    def follow(self, task_id: Id, after: int | None) -> Iterator[StreamEvent]:
        follower = StreamFollower(
            task_id, after, self.options.stream_retries, self.options.stream_backoff_s
        )
        while not follower.finished:
            cause: BaseException | None = None
            try:
                with self._http.stream("GET", follower.path, headers=follower.headers()) as r:
                    if r.is_error:
                        r.read()
                    if follower.opened(r):
                        for line in r.iter_lines():
                            event = follower.line(line)

                            if event is None:
                                continue

                            yield event

                            if event.type == "done":
                                return
            except _core.RETRYABLE as exc:
                cause = exc
            if not follower.finished:
                time.sleep(follower.broke_off(cause))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
