"""/v1: the OpenAI-compatible endpoint. `POST /v1/chat/completions` runs one of the tenant's
agents as a task and answers with its final answer; `GET /v1/models` lists the agents."""

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response, StreamingResponse

from app.api.access import RequireTaskCreate, RequireTaskRead
from app.api.deps import State
from app.api.errors import PROBLEM_JSON, problems
from app.api.inputs import CheckedRoute
from app.api.openai_compat.errors import run_failure_response, task_headers
from app.api.openai_compat.schemas import (
    ChatCompletion,
    ChatCompletionRequest,
    CompletionProblem,
    OpenAIModelList,
)
from app.api.openai_compat.service import (
    RunEnd,
    completion_chunks,
    list_agent_models,
    start_completion,
    wait_for_completion,
)

router = APIRouter(prefix="/v1", tags=["openai"], route_class=CheckedRoute)


def _run_failures() -> dict[int | str, dict[str, Any]]:
    described = {
        402: "The run spent the task's budget (`error_code` `budget_exceeded`).",
        422: "Invalid input (`errors` names each field), or the run failed (`task-failed`, "
        "`error_code` says why: `max_iterations`, `invalid_output`, `cancelled`...).",
        429: "Over one of the tenant's limits, at submission or during the run.",
        502: "The model (or a remote tool's server) failed (`llm_error`, `tool_unavailable`).",
        503: "The run was interrupted (`interrupted`) or the database is unavailable.",
    }
    responses = problems(401, 403, 404, 413, 422, 429, 503)
    responses[200] = {
        "description": "The completion; with `stream: true`, `chat.completion.chunk` events "
        "(`data: {...}` frames) ending with `data: [DONE]`, or with an `error` event when the "
        "run fails.",
        "content": {
            # As OpenAPI 3.2 documents sequential media: each frame's schema.
            "text/event-stream": {
                "itemSchema": {
                    "type": "object",
                    "required": ["data"],
                    "properties": {
                        "data": {
                            "type": "string",
                            "description": "A `chat.completion.chunk` as JSON, an `error` "
                            "object, or `[DONE]`.",
                        }
                    },
                }
            }
        },
    }
    for status, description in described.items():
        responses[status] = {
            "model": CompletionProblem,
            "description": description,
            "content": {
                PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/CompletionProblem"}}
            },
        }
    return responses


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    summary="Create a chat completion (run an agent)",
    responses=_run_failures(),
)
async def create_chat_completion(
    body: ChatCompletionRequest, caller: RequireTaskCreate, state: State
) -> Response:
    """Runs the agent `model` names (`agent:<name>[@N]` or `<name>[@N]`; another tenant's
    or an archived agent is unknown: 404) as a task with these `messages`, server-side with
    its own tools, and answers with its final answer; `usage` is the whole run's. The
    `X-OmniForge-Task-Id` and `X-OmniForge-Chain-Id` headers name the task and its chain.

    With `stream: true` the answer comes as `text/event-stream` `chat.completion.chunk`s:
    the role at once, keep-alive comments while the agent works, the answer's pieces once
    its LLM call has ended without tool calls, the finish reason, a usage chunk with
    `stream_options.include_usage`, then `data: [DONE]`. A run that fails then ends the
    stream with `data: {"error": {...}}` instead.

    Every error is a problem with an OpenAI-style `error` member. A run that ends without
    an answer answers by why: 402 `budget_exceeded`, 429 `rate_limited`, 502 `llm_error`,
    503 `interrupted`, 422 `task-failed` otherwise; `task_id` and `error_code` name it."""
    task = await start_completion(state, caller, body)
    headers = task_headers(task)
    if body.stream:
        return StreamingResponse(
            completion_chunks(state, caller, task, include_usage=body.include_usage),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers},
        )
    outcome = await wait_for_completion(state, caller, task)
    if isinstance(outcome, RunEnd):
        return run_failure_response(outcome.task, outcome.details)
    return JSONResponse(outcome.model_dump(mode="json"), headers=headers)


@router.get("/models", summary="List agents as models", responses=problems(401, 403, 503))
async def list_models(caller: RequireTaskRead, state: State) -> OpenAIModelList:
    """The tenant's agents that run tasks (archived ones are left out), the built-in
    `agent:default` first: each `id` is what a completion's `model` names."""
    return await list_agent_models(state, caller)
