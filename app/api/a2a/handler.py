"""The A2A request handler over our tasks: the SDK's bindings parse each request and render
each answer; every operation here is one of ours (the task service's submit, find, cancel
and stream), on behalf of the caller the route authenticated, on the agent its path names
(`A2ACall`). Nothing is stored here: our tasks, streams and store are
the truth."""

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from datetime import UTC
from uuid import UUID

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import a2a_pb2 as a2a
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import (
    A2AError,
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length, validate_history_length, validate_page_size
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from pydantic import ValidationError

from app.api.a2a.calls import A2ACall
from app.api.a2a.errors import a2a_error, only_text, refuse_looping
from app.api.a2a.events import StreamMapper
from app.api.a2a.mapping import OUR_STATES, a2a_task
from app.api.services import conversation_service
from app.api.sse import stream_position
from app.resources.agents import DEFAULT_AGENT
from app.runs import TaskSubmission
from app.runs.channel import StreamEvent, StreamItem
from app.runs.streams import task_stream
from app.runs.tasks import TaskFilter
from app.runs.tasks.hops import TRAIL_KEY, hops_above
from app.storage.pagination import Cursor
from app.storage.records import TaskRecord
from app.tools.a2a.extension import LAST_EVENT_ID_HEADER, trail_of

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def _as_a2a_errors() -> Iterator[None]:
    """Our domain errors leave as A2A errors (see `a2a_error`)."""
    try:
        yield
    except A2AError:
        raise
    except Exception as exc:
        error = a2a_error(exc)
        if error is None:
            raise
        raise error from exc


class TaskHandler(RequestHandler):
    """SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask and
    SubscribeToTask over our tasks; push notifications and the extended card are not
    offered (the card says so)."""

    async def on_get_task(self, params: a2a.GetTaskRequest, context: ServerCallContext) -> a2a.Task:
        validate_history_length(params)
        with _as_a2a_errors():
            task = await A2ACall.of(context).task(params.id)
        return apply_history_length(a2a_task(task), params)

    async def on_list_tasks(
        self, params: a2a.ListTasksRequest, context: ServerCallContext
    ) -> a2a.ListTasksResponse:
        """The agent's tasks of the caller's tenant, newest first; `page_token` is the
        `next_page_token` of the page before."""
        call = A2ACall.of(context)
        validate_history_length(params)
        page_size = DEFAULT_LIST_TASKS_PAGE_SIZE
        if params.HasField("page_size"):
            page_size = params.page_size
        validate_page_size(page_size)
        conversation_id: UUID | None = None
        if params.context_id:
            try:
                conversation_id = UUID(params.context_id)
            except ValueError:
                raise InvalidParamsError(f"no context {params.context_id!r} here") from None
        wanted = TaskFilter(
            agent=call.agent.name,
            # tasks from before agents ran the built-in one
            unnamed=call.agent.name == DEFAULT_AGENT,
            conversation_id=conversation_id,
            states=OUR_STATES.get(params.status, ())
            if params.status != a2a.TASK_STATE_UNSPECIFIED
            else None,
            changed_after=params.status_timestamp_after.ToDatetime(UTC)
            if params.HasField("status_timestamp_after")
            else None,
        )
        with _as_a2a_errors():
            cursor = Cursor.decode(params.page_token) if params.page_token else None
            page, total = await call.state.tasks.counted_page(
                call.caller, wanted, cursor=cursor, limit=page_size
            )
        return a2a.ListTasksResponse(
            tasks=[apply_history_length(a2a_task(task), params) for task in page.items],
            next_page_token=page.next_cursor or "",
            page_size=page_size,
            total_size=total,
        )

    async def on_cancel_task(
        self, params: a2a.CancelTaskRequest, context: ServerCallContext
    ) -> a2a.Task:
        """Stops the run (members their own tasks, tenant admins any) and answers the task
        as it ended; a finished task is not cancelable."""
        call = A2ACall.of(context)
        with _as_a2a_errors():
            task = await call.task(params.id)
            cancelled = await call.state.tasks.cancel(call.caller, task.id)
        return a2a_task(cancelled)

    async def on_message_send(
        self, params: a2a.SendMessageRequest, context: ServerCallContext
    ) -> a2a.Task:
        """Starts the task; answers at once with `return_immediately`, else once it has
        ended or waits for a human (`INPUT_REQUIRED`), following its stream (no polling)."""
        call = A2ACall.of(context)
        validate_history_length(params.configuration)
        with _as_a2a_errors():
            task = await _start(call, params.message)
            if params.configuration.return_immediately:
                return apply_history_length(a2a_task(task), params.configuration)
            mapper = StreamMapper(task)
            events = task_stream(
                call.state.runs,
                call.state.run_stores,
                task.id,
                task.tenant_id,
                task.chain_id,
                after=0,
                keepalive_s=None,
                family=False,
            )
            async with contextlib.aclosing(_stored_events(events)) as stored:
                async for item in stored:
                    mapper.feed(item)
                    if mapper.paused:
                        break
            task = await call.state.tasks.find(call.caller, task.id)
        done = a2a_task(task, state=mapper.state, message=mapper.message)
        return apply_history_length(done, params.configuration)

    async def on_message_send_stream(
        self, params: a2a.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """The task as started, then its status updates and its answer, until it ends or
        waits for a human (see `_follow`)."""
        call = A2ACall.of(context)
        with _as_a2a_errors():
            task = await _start(call, params.message)
            yield a2a_task(task)
            async for event in _follow(call, task, after=0):
                yield event

    async def on_subscribe_to_task(
        self, params: a2a.SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """With `Last-Event-ID` (the `event_id` of the last event the client got): every
        event after it, then the live ones, with no gap and no duplicate, even of a task that
        has ended since. Without: the task as it is now, then what comes next; a task that
        has ended has nothing more to stream."""
        call = A2ACall.of(context)
        last_event_id = _header(context, LAST_EVENT_ID_HEADER)
        with _as_a2a_errors():
            task = await call.task(params.id)
            if last_event_id is None:
                if task.is_finished:
                    raise UnsupportedOperationError(
                        f"task {task.id} has ended ({task.status}): nothing more to stream; "
                        f"GetTask reads it, `{LAST_EVENT_ID_HEADER}` replays what a stream missed"
                    )
                position = task.last_seq
                yield a2a_task(task, event_id=position)
            else:
                position = stream_position(last_event_id, None)
            async for event in _follow(call, task, after=position):
                yield event

    async def on_create_task_push_notification_config(
        self, params: a2a.TaskPushNotificationConfig, context: ServerCallContext
    ) -> a2a.TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: a2a.GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> a2a.TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: a2a.ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> a2a.ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: a2a.DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: a2a.GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> a2a.AgentCard:
        raise ExtendedAgentCardNotConfiguredError


async def _start(call: A2ACall, message: a2a.Message) -> TaskRecord:
    """Submits the message's text as a task of the agent: the next turn of its context (a
    conversation of the tenant with this agent), or the first of a new conversation, which
    is deleted again when the task is refused. A message whose hop trail loops back into an
    agent already working on it, or goes too deep, is refused first (`_checked_trail`)."""
    if message.task_id:
        raise UnsupportedOperationError(
            f"task {message.task_id} takes no further input: a new message starts a new task "
            "(its context_id continues the conversation); tool calls waiting for approval are "
            f"decided at POST /api/v1/tasks/{message.task_id}/approvals/{{approval_id}}"
        )
    kinds = [part.WhichOneof("content") or "empty" for part in message.parts]
    if any(kind != "text" for kind in kinds):
        raise only_text(sorted({kind for kind in kinds if kind != "text"}))
    text = "\n".join(part.text for part in message.parts)
    if not text.strip():
        raise InvalidParamsError("the message has no text")
    conversation_id: UUID | None = None
    if message.context_id:
        try:
            conversation_id = UUID(message.context_id)
        except ValueError:
            raise InvalidParamsError(
                f"context {message.context_id!r} is no conversation of this tenant"
            ) from None
    trail = await _checked_trail(call, message)
    try:
        submission = TaskSubmission(
            input=text,
            agent=call.agent.name,
            conversation_id=conversation_id,
            metadata={TRAIL_KEY: trail} if trail else {},
        )
    except ValidationError as exc:
        errors = [
            {"field": ".".join(map(str, error["loc"])), "message": error["msg"]}
            for error in exc.errors()
        ]
        raise InvalidParamsError(
            "the message cannot be a task; see `errors`", {"errors": errors}
        ) from exc
    if conversation_id is not None:
        submitted = await call.state.tasks.submit(call.caller, submission)
        return await call.state.tasks.find(call.caller, submitted.task_id)
    conversations = conversation_service(call.state)
    started = await conversations.start(call.caller, agent=call.agent.name, metadata={})
    try:
        submission = submission.model_copy(update={"conversation_id": started.id})
        submitted = await call.state.tasks.submit(call.caller, submission)
    except Exception:
        # Refused (a rate limit, a budget, a drain…): the context it would have begun
        # never began. The refusal is what the caller hears, whatever becomes of this.
        try:
            await conversations.discard_unused(call.caller, started.id)
        except Exception:
            logger.exception("could not delete conversation %s of a refused task", started.id)
        raise
    return await call.state.tasks.find(call.caller, submitted.task_id)


async def _checked_trail(call: A2ACall, message: a2a.Message) -> list[str]:
    """The hop trail the message came with, once it is known not to loop back into an
    agent already working on it, nor too deep (see `app.runs.tasks.hops`)."""
    trail = trail_of(MessageToDict(message.metadata))
    if not trail:
        return []
    max_depth = call.state.settings.max_agent_depth
    async with call.state.database.read() as connection:
        hops = await hops_above(connection, call.caller.tenant_id, trail, max_depth=max_depth)
    refuse_looping(call.agent.name, hops, max_depth=max_depth)
    return trail


async def _follow(call: A2ACall, task: TaskRecord, *, after: int) -> AsyncIterator[Event]:
    """The A2A events of the task's stream after event `after`, as the caller may see the
    stream (read from its start, so each event is what it was the first time); ends with
    the task, or once it waits for a human."""
    mapper = StreamMapper(task)
    events = await call.state.tasks.stream(call.caller, task, after=0, sub_agents=False)
    async with contextlib.aclosing(_stored_events(events)) as stored:
        async for item in stored:
            event = mapper.feed(item)
            if event is None or item.seq <= after:
                continue
            yield event
            if mapper.paused:
                return


async def _stored_events(items: AsyncIterator[StreamItem]) -> AsyncGenerator[StreamEvent]:
    """The stream's stored events (no keep-alives, no live deltas); closing it closes the
    stream at once. (An A2A task's stream is its own events: its sub-agents are not A2A
    tasks.)"""
    try:
        async for item in items:
            if isinstance(item, StreamEvent):
                yield item
    finally:
        aclose = getattr(items, "aclose", None)
        if aclose is not None:
            await aclose()


def _header(context: ServerCallContext, name: str) -> str | None:
    headers = context.state.get("headers") or {}
    value = headers.get(name.lower())
    return value if isinstance(value, str) else None
