"""What the sync and the async client share: every call built as a `Call` (method, path,
query, body, and how to read the answer), and the state of a stream being followed. The two
clients only send them."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Generic, TypeVar
from uuid import UUID

import httpx
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from omniforge_client._sse import SSEDecoder
from omniforge_client.errors import APIError, StreamInterrupted, error_from
from omniforge_client.events import StreamEvent, parse_event
from omniforge_client.inputs import AgentChanges, AgentDefinition, TaskOptions, TurnOptions
from omniforge_client.models import (
    Agent,
    AgentPage,
    Chain,
    Conversation,
    ConversationDetail,
    ConversationPage,
    CostOrder,
    CostReport,
    GroupBy,
    Me,
    Task,
    TaskAccepted,
    TaskCosts,
    TaskPage,
    TaskState,
    Tool,
    ToolList,
    UsageReport,
)

__version__ = "0.1.0"
API = "/api/v1"
EVENT_STREAM = "text/event-stream"

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
M = TypeVar("M", bound=BaseModel)
Id = UUID | str
Query = dict[str, str | int]


@dataclass(frozen=True, slots=True)
class Options:
    """How a client talks to the service."""

    base_url: str
    headers: dict[str, str]
    timeout: float
    stream_retries: int
    stream_backoff_s: float


def options(
    base_url: str,
    *,
    api_key: str | None,
    token: str | None,
    timeout: float,
    stream_retries: int,
    stream_backoff_s: float,
    headers: Mapping[str, str] | None,
) -> Options:
    if api_key is not None and token is not None:
        raise ValueError("give an api_key or a token, not both")
    credential = api_key if api_key is not None else token
    sent = {"User-Agent": f"omniforge-client/{__version__}", **(headers or {})}
    if credential is not None:
        sent["Authorization"] = f"Bearer {credential}"
    return Options(base_url.rstrip("/"), sent, timeout, stream_retries, stream_backoff_s)


@dataclass(frozen=True, slots=True)
class Call(Generic[T_co]):
    """One request and how its answer becomes a value."""

    method: str
    path: str
    read: Callable[[httpx.Response], T_co]
    params: Query | None = None
    body: Any = None
    headers: Mapping[str, str] | None = None

    def result(self, response: httpx.Response) -> T_co:
        """The answer's value; a refusal raises its typed error (the body must be read)."""
        if response.is_error:
            raise error_from(response)
        return self.read(response)


def _model(cls: type[M]) -> Callable[[httpx.Response], M]:
    return lambda response: cls.model_validate(response.json())


def _nothing(response: httpx.Response) -> None:
    return None


def _tools(response: httpx.Response) -> list[Tool]:
    return ToolList.model_validate(response.json()).items


def _query(**values: object) -> Query:
    """Query parameters, leaving out those not given."""
    query: Query = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            query[name] = "true" if value else "false"
        elif isinstance(value, datetime | date):
            query[name] = value.isoformat()
        elif isinstance(value, int | str):
            query[name] = value
        else:
            query[name] = str(value)
    return query


def _body(values: Mapping[str, Any]) -> Any:
    return to_jsonable_python(dict(values))


# Tasks


def submit_task(
    input: str | None,
    messages: Sequence[Mapping[str, Any]] | None,
    options: TaskOptions,
    idempotency_key: str | None = None,
) -> Call[TaskAccepted]:
    if (input is None) == (messages is None):
        raise ValueError("give either input or messages")
    first: dict[str, Any] = {"input": input} if input is not None else {"messages": messages}
    headers = None if idempotency_key is None else {"Idempotency-Key": idempotency_key}
    return Call(
        "POST",
        f"{API}/tasks",
        _model(TaskAccepted),
        body=_body({**first, **options}),
        headers=headers,
    )


def get_task(task_id: Id) -> Call[Task]:
    return Call("GET", f"{API}/tasks/{task_id}", _model(Task))


def list_tasks(
    cursor: str | None, status: TaskState | None, agent: str | None, limit: int | None
) -> Call[TaskPage]:
    params = _query(status=status, agent=agent, cursor=cursor, limit=limit)
    return Call("GET", f"{API}/tasks", _model(TaskPage), params=params)


def cancel_task(task_id: Id) -> Call[Task]:
    return Call("POST", f"{API}/tasks/{task_id}/cancel", _model(Task))


def me() -> Call[Me]:
    return Call("GET", f"{API}/me", _model(Me))


def task_chain(task_id: Id) -> Call[Chain]:
    return Call("GET", f"{API}/tasks/{task_id}/chain", _model(Chain))


def task_costs(task_id: Id) -> Call[TaskCosts]:
    return Call("GET", f"{API}/tasks/{task_id}/costs", _model(TaskCosts))


# Conversations


def start_conversation(
    agent: str | None, metadata: Mapping[str, Any] | None, file_ids: Sequence[Id] | None
) -> Call[Conversation]:
    body: dict[str, Any] = {}
    if agent is not None:
        body["agent"] = agent
    if metadata is not None:
        body["metadata"] = metadata
    if file_ids is not None:
        body["file_ids"] = file_ids
    return Call("POST", f"{API}/conversations", _model(Conversation), body=_body(body))


def get_conversation(conversation_id: Id) -> Call[ConversationDetail]:
    return Call("GET", f"{API}/conversations/{conversation_id}", _model(ConversationDetail))


def list_conversations(cursor: str | None, limit: int | None) -> Call[ConversationPage]:
    params = _query(cursor=cursor, limit=limit)
    return Call("GET", f"{API}/conversations", _model(ConversationPage), params=params)


def send_turn(
    conversation_id: Id,
    input: str | None,
    messages: Sequence[Mapping[str, Any]] | None,
    options: TurnOptions,
) -> Call[TaskAccepted]:
    return submit_task(input, messages, TaskOptions(**options, conversation_id=conversation_id))


# Agents


def create_agent(name: str, definition: AgentDefinition) -> Call[Agent]:
    body = _body({"name": name, **definition})
    return Call("POST", f"{API}/agents", _model(Agent), body=body)


def get_agent(name: str, version: int | None) -> Call[Agent]:
    path = f"{API}/agents/{name}" + ("" if version is None else f"/versions/{version}")
    return Call("GET", path, _model(Agent))


def list_agents(cursor: str | None, archived: bool, limit: int | None) -> Call[AgentPage]:
    params = _query(archived=archived or None, cursor=cursor, limit=limit)
    return Call("GET", f"{API}/agents", _model(AgentPage), params=params)


def update_agent(name: str, changes: AgentChanges) -> Call[Agent]:
    return Call("PATCH", f"{API}/agents/{name}", _model(Agent), body=_body(changes))


def agent_versions(name: str, cursor: str | None, limit: int | None) -> Call[AgentPage]:
    params = _query(cursor=cursor, limit=limit)
    return Call("GET", f"{API}/agents/{name}/versions", _model(AgentPage), params=params)


def archive_agent(name: str) -> Call[None]:
    return Call("DELETE", f"{API}/agents/{name}", _nothing)


# Tools and costs


def list_tools() -> Call[list[Tool]]:
    return Call("GET", f"{API}/tools", _tools)


def cost_report(
    tenant_id: str,
    since: datetime | date | None,
    until: datetime | date | None,
    group_by: GroupBy | None,
    limit: int | None,
    split_by: GroupBy | None = None,
    order: CostOrder | None = None,
) -> Call[CostReport]:
    params = _query(
        group_by=group_by,
        split_by=split_by,
        order=order,
        limit=limit,
        **{"from": since, "to": until},
    )
    return Call("GET", f"{API}/tenants/{tenant_id}/costs", _model(CostReport), params=params)


def usage_report(tenant_id: str, since: date | None, until: date | None) -> Call[UsageReport]:
    params = _query(**{"from": since, "to": until})
    return Call("GET", f"{API}/tenants/{tenant_id}/usage", _model(UsageReport), params=params)


# Streams


class _Retry(Exception):
    """A refusal worth reconnecting after (the service restarting, overloaded)."""

    def __init__(self, error: APIError) -> None:
        super().__init__(str(error))
        self.error = error


RETRYABLE = (httpx.TransportError, _Retry)
"""What breaks a stream off without ending it: the clients reconnect after these."""


@dataclass
class StreamFollower:
    """Where a followed stream stands: the last event id received, so that a reconnect sends
    it as `Last-Event-ID` and the service replays exactly what was missed; events at or
    before it are dropped should they come again. Reconnects are bounded: `retries` in a
    row without a new event, waiting `backoff_s`, doubled each time (at most 30 s)."""

    task_id: Id
    last_event_id: int | None
    retries: int
    backoff_s: float
    reconnects: int = 0
    finished: bool = False
    _failures: int = 0
    _decoder: SSEDecoder = field(default_factory=SSEDecoder)

    @property
    def path(self) -> str:
        return f"{API}/tasks/{self.task_id}/events"

    def headers(self) -> dict[str, str]:
        headers = {"Accept": EVENT_STREAM, "Cache-Control": "no-cache"}
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = str(self.last_event_id)
        return headers

    def opened(self, response: httpx.Response) -> bool:
        """Whether the response is a stream to read: a finished task with nothing more
        answers 204, a refusal raises (its body must be read)."""
        if response.is_error:
            error = error_from(response)
            if response.status_code >= 500 or response.status_code == 429:
                raise _Retry(error)
            raise error
        self._decoder = SSEDecoder()
        if response.status_code == 204:
            self.finished = True
            return False
        return True

    def line(self, line: str) -> StreamEvent | None:
        """The event a line completes, unless it is one already received."""
        sse = self._decoder.feed(line)
        if sse is None:
            return None
        event_id = int(sse.id) if sse.id is not None and sse.id.isdecimal() else None
        if event_id is not None:
            if self.last_event_id is not None and event_id <= self.last_event_id:
                return None
            self.last_event_id = event_id
            self._failures = 0
        event = parse_event(sse.event, sse.data, event_id)
        if event.type == "done":
            self.finished = True
        return event

    def broke_off(self, cause: BaseException | None) -> float:
        """The stream ended before `done`: how long to wait before reconnecting."""
        self._failures += 1
        if self._failures > self.retries:
            raise StreamInterrupted(
                f"the stream of task {self.task_id} broke off {self._failures} times in a row",
                last_event_id=self.last_event_id,
            ) from (cause.error if isinstance(cause, _Retry) else cause)
        self.reconnects += 1
        return float(min(self.backoff_s * 2 ** (self._failures - 1), 30.0))
