"""Completions as tasks: the model names an agent, the messages become the task's, the run is
followed through the task's stream until `done`, and its answer and usage are the reply.

Only the answer reaches the client as `content`. An LLM call's text is not known to be the
answer until the call has ended without tool calls (a model may write before it calls a
tool), so each call's streamed pieces are held and sent once the chain completes with them
as its answer; an answer the pieces do not spell out (the text ReAct format, a reader's
deltas cut short) is sent whole."""

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from app.api.errors import NOT_FOUND, VALIDATION, ApiError, FieldProblem
from app.api.openai_compat.errors import run_failure
from app.api.openai_compat.schemas import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Choice,
    ChunkChoice,
    ChunkDelta,
    CompletionUsage,
    FinishReason,
    OpenAIModel,
    OpenAIModelList,
)
from app.api.services import agent_service
from app.api.state import AppState
from app.chain import TaskState
from app.governance.callers import Caller
from app.resources.agents import DEFAULT_AGENT, AgentArchived
from app.runs import TaskSubmission
from app.runs.agents import UnknownAgent
from app.runs.channel import LiveDelta
from app.runs.models import AGENT_REF_PATTERN
from app.runs.streams import task_stream
from app.storage.records import TaskRecord

MODEL_PREFIX = "agent:"
_ANSWERED = (TaskState.COMPLETED, TaskState.INCOMPLETE)
_DELTA_DATA = b"\ndata: "


def agent_ref(model: str) -> str:
    """The agent reference a `model` names: `agent:<name>[@N]` or `<name>[@N]`."""
    ref = model.removeprefix(MODEL_PREFIX)
    if re.fullmatch(AGENT_REF_PATTERN, ref) is None:
        raise _unknown_model(model, "models here are the tenant's agents (see /v1/models)")
    return ref


def _unknown_model(model: str, why: str) -> ApiError:
    message = f"no model {model!r}: {why}"
    return ApiError(NOT_FOUND, message, errors=[FieldProblem(field="body.model", message=why)])


async def start_completion(
    state: AppState, caller: Caller, body: ChatCompletionRequest
) -> TaskRecord:
    """Submits the completion as a task of the agent its model names."""
    ref = agent_ref(body.model)
    try:
        submission = TaskSubmission(
            messages=[message.as_chat_message() for message in body.messages],
            agent=ref,
            metadata=body.metadata or {},
            stream_output=body.stream,
        )
    except ValidationError as exc:
        errors = [
            FieldProblem(field=".".join(["body", *map(str, error["loc"])]), message=error["msg"])
            for error in exc.errors()
        ]
        raise ApiError(VALIDATION, "the request is not valid; see `errors`", errors=errors) from exc
    try:
        submitted = await state.tasks.submit(caller, submission)
    except UnknownAgent as exc:
        raise _unknown_model(body.model, "no such agent in this tenant") from exc
    except AgentArchived as exc:
        raise _unknown_model(body.model, "the agent is archived") from exc
    return await state.tasks.find(caller, submitted.task_id)


@dataclass(slots=True)
class RunEnd:
    """The run's end: its task as stored after `done`, and its failure's details."""

    task: TaskRecord
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def answered(self) -> bool:
        return self.task.status in _ANSWERED


async def follow_answer(
    state: AppState, caller: Caller, task: TaskRecord, *, keepalive_s: float | None
) -> AsyncIterator[str | RunEnd | None]:
    """The run's answer in pieces once it is the answer, `None` for each keep-alive, and
    last its `RunEnd`."""
    call: tuple[UUID, int] | None = None
    pieces: list[str] = []
    details: dict[str, Any] = {}
    events = task_stream(
        state.runs,
        state.run_stores,
        task.id,
        task.tenant_id,
        task.chain_id,
        after=0,
        keepalive_s=keepalive_s,
        family=False,
    )
    async for item in events:
        if item is None:
            yield None
        elif isinstance(item, LiveDelta):
            delta = _delta(item)
            if delta["kind"] != "content":
                continue
            key = (UUID(delta["correlation_id"]), int(delta["attempt"]))
            if key != call:  # another call, or the same one streaming again from the start
                call, pieces = key, []
            pieces.append(delta["delta"])
        elif item.type == "chain_completed":
            answer = json.loads(item.data).get("answer") or ""
            for piece in pieces if "".join(pieces) == answer else [answer]:
                if piece:
                    yield piece
        elif item.type == "chain_failed":
            details = json.loads(item.data).get("details") or {}
    yield RunEnd(await state.tasks.find(caller, task.id), details)


def _delta(item: LiveDelta) -> dict[str, Any]:
    # A delta keeps only its SSE frame (`event: output_delta\ndata: {...}\n\n`).
    data: dict[str, Any] = json.loads(item.frame.partition(_DELTA_DATA)[2])
    return data


def completion_id(task: TaskRecord) -> str:
    return f"chatcmpl-{task.id.hex}"


def model_of(task: TaskRecord) -> str:
    return f"{MODEL_PREFIX}{task.agent_name or DEFAULT_AGENT}@{task.agent_version or 1}"


def usage_of(task: TaskRecord) -> CompletionUsage:
    usage = task.usage
    return CompletionUsage(
        prompt_tokens=usage.input_tokens,
        completion_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
    )


def finish_reason(task: TaskRecord) -> FinishReason:
    return "length" if task.status is TaskState.INCOMPLETE else "stop"


async def wait_for_completion(
    state: AppState, caller: Caller, task: TaskRecord
) -> ChatCompletion | RunEnd:
    """The completion once the run is done, or the end of a run that did not answer."""
    end: RunEnd | None = None
    async for item in follow_answer(state, caller, task, keepalive_s=None):
        if isinstance(item, RunEnd):
            end = item
    assert end is not None
    if not end.answered:
        return end
    done = end.task
    return ChatCompletion(
        id=completion_id(done),
        created=int(done.created_at.timestamp()),
        model=model_of(done),
        choices=[
            Choice(
                message=AssistantMessage(content=done.final_answer),
                finish_reason=finish_reason(done),
            )
        ],
        usage=usage_of(done),
    )


KEEPALIVE_FRAME = b": keep-alive\n\n"


async def completion_chunks(
    state: AppState, caller: Caller, task: TaskRecord, *, include_usage: bool
) -> AsyncIterator[bytes]:
    """The completion as `chat.completion.chunk` events: the role at once, the answer's
    pieces, the finish reason, the usage when asked for, then `[DONE]`. A run that fails
    ends the stream with an `error` event instead (OpenAI SDKs raise it)."""
    created = int(task.created_at.timestamp())

    def chunk(
        delta: ChunkDelta,
        reason: FinishReason | None = None,
        usage: CompletionUsage | None = None,
    ) -> bytes:
        choices = [] if usage is not None else [ChunkChoice(delta=delta, finish_reason=reason)]
        body = ChatCompletionChunk(
            id=completion_id(task),
            created=created,
            model=model_of(task),
            choices=choices,
            usage=usage,
        ).model_dump(mode="json", exclude_none=True)
        if include_usage:
            body.setdefault("usage", None)
        return _frame(body)

    yield chunk(ChunkDelta(role="assistant", content=""))
    async for item in follow_answer(
        state, caller, task, keepalive_s=state.settings.sse_keepalive_s
    ):
        if item is None:
            yield KEEPALIVE_FRAME
        elif isinstance(item, str):
            yield chunk(ChunkDelta(content=item))
        elif not item.answered:
            _, problem = run_failure(item.task, item.details)
            yield _frame({"error": {**problem["error"], "task_id": str(task.id)}})
            return
        else:
            yield chunk(ChunkDelta(), finish_reason(item.task))
            if include_usage:
                yield chunk(ChunkDelta(), usage=usage_of(item.task))
    yield b"data: [DONE]\n\n"


def _frame(body: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(body, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


async def list_agent_models(state: AppState, caller: Caller) -> OpenAIModelList:
    """The tenant's agents that run tasks (not archived), the built-in `default` first."""
    tenant = caller.tenant
    models = [
        OpenAIModel(
            id=f"{MODEL_PREFIX}{DEFAULT_AGENT}",
            created=int(tenant.record.created_at.timestamp()),
            owned_by=caller.tenant_id,
        )
    ]
    models += [
        OpenAIModel(
            id=f"{MODEL_PREFIX}{record.name}",
            created=int(record.created_at.timestamp()),
            owned_by=caller.tenant_id,
        )
        for record in await agent_service(state).all(caller)
    ]
    return OpenAIModelList(data=models)
