"""Errors as OpenAI SDKs read them: every problem under `/v1/` also carries an OpenAI-style
`error` member (`message`, `type`, `code`, `param`), and a run that failed answers with a
status that says why, never a 500 and never a made-up answer."""

import json
from typing import Any

from fastapi.responses import JSONResponse
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import (
    PROBLEM_BASE,
    PROBLEM_JSON,
    RATE_LIMITED,
    Problem,
    ProblemType,
)
from app.chain import ErrorCode
from app.errors import BUDGET_EXCEEDED, MODEL_FAILED, TASK_FAILED, TASK_INTERRUPTED
from app.governance.quotas import retry_after_header
from app.storage.records import TaskRecord

OPENAI_PREFIX = "/v1/"
TASK_ID_HEADER = "X-OmniForge-Task-Id"
CHAIN_ID_HEADER = "X-OmniForge-Chain-Id"


# Why a run failed → how the completion answers. Statuses OpenAI SDKs retry (429, 5xx) only
# where a retry can succeed; anything else is the task's own failure (422).
_FAILURES: dict[ErrorCode, ProblemType] = {
    ErrorCode.BUDGET_EXCEEDED: BUDGET_EXCEEDED,
    ErrorCode.RATE_LIMITED: RATE_LIMITED,
    ErrorCode.LLM_ERROR: MODEL_FAILED,
    ErrorCode.TOOL_UNAVAILABLE: MODEL_FAILED,
    ErrorCode.INTERRUPTED: TASK_INTERRUPTED,
}

_OPENAI_TYPES = {
    401: "authentication_error",
    402: "insufficient_quota",
    403: "permission_error",
    429: "rate_limit_error",
}


def task_headers(task: TaskRecord) -> dict[str, str]:
    """Where the completion's chain can be opened: on every answer about a started run."""
    return {TASK_ID_HEADER: str(task.id), CHAIN_ID_HEADER: str(task.chain_id)}


def run_failure(task: TaskRecord, details: dict[str, Any]) -> tuple[ProblemType, dict[str, Any]]:
    """The problem of a task that ended without an answer, and its body (`error` included)."""
    code = task.error_code or ErrorCode.INTERNAL_ERROR
    problem = _FAILURES.get(code, TASK_FAILED)
    message = task.error_message or f"the task ended {task.status}"
    body = Problem(
        type=problem.uri, title=problem.title, status=problem.status, detail=message
    ).model_dump(exclude_none=True)
    body.update(task_id=str(task.id), error_code=str(code))
    if code is ErrorCode.RATE_LIMITED:
        body["limit"] = details.get("limit")
        body["retry_after_s"] = details.get("retry_after_s")
    return problem, with_openai_error(body)


def run_failure_response(task: TaskRecord, details: dict[str, Any]) -> JSONResponse:
    problem, body = run_failure(task, details)
    headers = task_headers(task)
    retry_after = details.get("retry_after_s")
    if problem is RATE_LIMITED and isinstance(retry_after, int | float):
        header = retry_after_header(float(retry_after))
        if header is not None:
            headers["Retry-After"] = header
    elif problem is TASK_INTERRUPTED:
        headers["Retry-After"] = "1"
    return JSONResponse(body, status_code=problem.status, media_type=PROBLEM_JSON, headers=headers)


def with_openai_error(body: dict[str, Any]) -> dict[str, Any]:
    """The problem with an OpenAI-style `error` member: `code` is why a run failed or the
    problem's slug, `param` the first field the problem names (without `body.`)."""
    if "error" in body:
        return body
    status = body.get("status")
    status = status if isinstance(status, int) else 500
    slug = str(body.get("type", "")).removeprefix(PROBLEM_BASE)
    errors = body.get("errors") or []
    param = None
    if errors and isinstance(errors[0], dict):
        field = str(errors[0].get("field", ""))
        param = field.split(".", 1)[1] if "." in field else field or None
    kind = _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    message = str(body.get("detail", body.get("title", "")))
    if param and errors[0].get("message"):
        message = f"{message} ({param}: {errors[0]['message']})"
    code = body.get("error_code") or slug or None
    return {**body, "error": {"message": message, "type": kind, "code": code, "param": param}}


class OpenAIErrorBodies:
    """Adds the OpenAI-style `error` member to every problem answered under `/v1/` (the
    authentication's 401s and the body limit's 413s among them): OpenAI SDKs show its
    `message`. Other responses, and everything outside `/v1/`, pass untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(OPENAI_PREFIX):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        parts: list[bytes] = []

        async def sending(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = MutableHeaders(raw=list(message.get("headers", [])))
                if headers.get("content-type") == PROBLEM_JSON:
                    start = message  # held until the body is complete
                    return
            elif message["type"] == "http.response.body" and start is not None:
                parts.append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                body = _rewritten(b"".join(parts))
                headers = MutableHeaders(raw=list(start.get("headers", [])))
                headers["content-length"] = str(len(body))
                await send({**start, "headers": headers.raw})
                await send({"type": "http.response.body", "body": body})
                return
            await send(message)

        await self.app(scope, receive, sending)


def _rewritten(body: bytes) -> bytes:
    try:
        problem = json.loads(body)
    except ValueError:
        return body
    if not isinstance(problem, dict):
        return body
    return json.dumps(with_openai_error(problem), ensure_ascii=False).encode()
