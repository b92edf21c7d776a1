"""One mapping from errors to RFC 9457 problem details (`application/problem+json`)."""

import logging
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.governance.quotas import QuotaRefusal, RateLimited, retry_after_header
from app.runs.agents import AgentArchived, UnknownAgent
from app.runs.errors import (
    Forbidden,
    InvalidSubmission,
    ModelNotApproved,
    NotFound,
    TaskAlreadyFinished,
    TenantRefused,
    ToolsNotPermitted,
)
from app.security import AuthenticationFailed
from app.storage.agents import AgentExists
from app.storage.erasure import TaskUnfinished
from app.storage.pagination import InvalidCursor
from app.storage.runs import ConversationBusy
from app.storage.tenants import TenantExists
from app.tools.documents import DocumentRefused, DocumentTooLarge

logger = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
PROBLEM_BASE = "https://omniforge.dev/problems/"


@dataclass(frozen=True, slots=True)
class ProblemType:
    slug: str
    title: str
    status: int

    @property
    def uri(self) -> str:
        return PROBLEM_BASE + self.slug


BAD_REQUEST = ProblemType("bad-request", "Bad request", 400)
UNAUTHORIZED = ProblemType("unauthorized", "Authentication required", 401)
FORBIDDEN = ProblemType("forbidden", "Permission denied", 403)
TENANT_UNKNOWN = ProblemType("tenant-unknown", "Unknown tenant", 403)
TENANT_DISABLED = ProblemType("tenant-disabled", "Tenant disabled", 403)
TENANT_EXISTS = ProblemType("tenant-exists", "Tenant already exists", 409)
NOT_FOUND = ProblemType("not-found", "Not found", 404)
METHOD_NOT_ALLOWED = ProblemType("method-not-allowed", "Method not allowed", 405)
TASK_FINISHED = ProblemType("task-finished", "Task already finished", 409)
TASK_UNFINISHED = ProblemType("task-unfinished", "Task not finished yet", 409)
AGENT_EXISTS = ProblemType("agent-exists", "Agent already exists", 409)
AGENT_ARCHIVED = ProblemType("agent-archived", "Agent archived", 409)
AGENT_BUILTIN = ProblemType("agent-builtin", "Built-in agent", 409)
MCP_SERVER_EXISTS = ProblemType("mcp-server-exists", "MCP server already exists", 409)
REMOTE_AGENT_EXISTS = ProblemType("remote-agent-exists", "Remote agent already exists", 409)
CONVERSATION_BUSY = ProblemType("conversation-busy", "Conversation busy", 409)
APPROVAL_DECIDED = ProblemType("approval-decided", "Approval already decided", 409)
SCHEDULE_UNRESUMABLE = ProblemType("schedule-unresumable", "Schedule cannot resume", 409)
PAYLOAD_TOO_LARGE = ProblemType("payload-too-large", "Request body too large", 413)
DOCUMENT_TOO_LARGE = ProblemType("document-too-large", "Document too large to read", 413)
DOCUMENT_REFUSED = ProblemType("document-refused", "Document over its reading limits", 422)
VALIDATION = ProblemType("validation-error", "Invalid request", 422)
MODEL_NOT_APPROVED = ProblemType("model-not-approved", "Model not approved", 422)
IDEMPOTENCY_KEY_REUSED = ProblemType(
    "idempotency-key-reused", "Idempotency key used with another request", 422
)
RATE_LIMITED = ProblemType("rate-limited", "Rate limit reached", 429)
INTERNAL = ProblemType("internal-error", "Internal server error", 500)
UNAVAILABLE = ProblemType("service-unavailable", "Service unavailable", 503)
# When a client may try again after a 503 for an unreachable database.
RETRY_AFTER_S = 1.0

_BY_STATUS = {
    p.status: p
    for p in (BAD_REQUEST, UNAUTHORIZED, NOT_FOUND, METHOD_NOT_ALLOWED, PAYLOAD_TOO_LARGE)
}


class FieldProblem(BaseModel):
    field: str = Field(description="Dotted path of the offending input, e.g. `body.input`.")
    message: str


class Problem(BaseModel):
    """An error response (RFC 9457). `type` is stable; `detail` is for humans."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[FieldProblem] | None = None
    permission: str | None = Field(
        default=None, description="On 403 `forbidden`: the permission the caller lacks."
    )
    approved: list[str] | None = Field(
        default=None, description="On 422 `model-not-approved`: the models the tenant approved."
    )
    limit: str | None = Field(
        default=None, description="On 429 `rate-limited`: the tenant limit that refused."
    )
    retry_after_s: float | None = Field(
        default=None, description="On 429: seconds until the limit admits this request."
    )
    agent: str | None = Field(
        default=None, description="On 409 `agent-exists` and `agent-archived`: the agent."
    )
    running_task_id: str | None = Field(
        default=None, description="On 409 `conversation-busy`: the turn that is running."
    )


class ApiError(Exception):
    """An HTTP-level refusal raised by the API layer itself."""

    def __init__(
        self,
        problem: ProblemType,
        detail: str,
        *,
        errors: list[FieldProblem] | None = None,
        headers: dict[str, str] | None = None,
        permission: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.problem = problem
        self.detail = detail
        self.errors = errors
        self.headers = headers
        self.permission = permission
        # Further members of the problem (`approved`, `limit`...).
        self.extra = extra or {}


def problem_response(
    problem: ProblemType,
    detail: str,
    *,
    errors: list[FieldProblem] | None = None,
    headers: dict[str, str] | None = None,
    permission: str | None = None,
    extra: dict[str, Any] | None = None,
) -> JSONResponse:
    body = Problem(
        type=problem.uri,
        title=problem.title,
        status=problem.status,
        detail=detail,
        errors=errors,
        permission=permission,
        **(extra or {}),
    )
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=problem.status,
        media_type=PROBLEM_JSON,
        headers=headers,
    )


def _as_api_error(exc: Exception) -> ApiError | None:
    """The one table from domain errors to problems."""
    match exc:
        case ApiError():
            return exc
        case AuthenticationFailed():
            challenge = 'Bearer realm="omniforge"'
            if exc.token_given:  # RFC 6750: no error code when no token was sent
                challenge += f', error="invalid_token", error_description="{exc.reason}"'
            return ApiError(UNAUTHORIZED, exc.reason, headers={"WWW-Authenticate": challenge})
        case NotFound():
            return ApiError(NOT_FOUND, str(exc))
        case Forbidden():
            return ApiError(FORBIDDEN, str(exc), permission=exc.permission)
        case TenantRefused():
            problem = TENANT_DISABLED if exc.disabled else TENANT_UNKNOWN
            return ApiError(problem, str(exc))
        case TenantExists():
            return ApiError(TENANT_EXISTS, str(exc))
        case ToolsNotPermitted():
            errors = [
                FieldProblem(field=f"body.{p.field}", message=p.message) for p in exc.problems
            ]
            # Not a missing permission but a missing role: `errors` names it per tool.
            return ApiError(
                FORBIDDEN, "the task names tools the caller's roles may not use", errors=errors
            )
        case TaskAlreadyFinished():
            return ApiError(TASK_FINISHED, str(exc))
        case TaskUnfinished():
            return ApiError(TASK_UNFINISHED, str(exc))
        case AgentArchived():
            return ApiError(AGENT_ARCHIVED, str(exc), extra={"agent": exc.name})
        case AgentExists():
            return ApiError(AGENT_EXISTS, str(exc), extra={"agent": exc.name})
        case UnknownAgent():
            errors = [FieldProblem(field="body.agent", message=str(exc))]
            return ApiError(VALIDATION, str(exc), errors=errors)
        case ConversationBusy():
            extra = {} if exc.running is None else {"running_task_id": str(exc.running)}
            return ApiError(CONVERSATION_BUSY, str(exc), extra=extra)
        case ModelNotApproved():
            errors = [
                FieldProblem(field=f"body.{p.field}", message=p.message) for p in exc.problems
            ]
            return ApiError(
                MODEL_NOT_APPROVED,
                f"model {exc.model!r} is not approved for this tenant",
                errors=errors,
                extra={"approved": exc.approved},
            )
        case RateLimited():
            refusal = exc.refusal
            headers = rate_limit_headers(refusal)
            return ApiError(
                RATE_LIMITED,
                str(exc),
                headers=headers,
                extra={"limit": refusal.limit, "retry_after_s": refusal.retry_after_s},
            )
        case InvalidSubmission():
            errors = [
                FieldProblem(field=f"body.{p.field}", message=p.message) for p in exc.problems
            ]
            return ApiError(VALIDATION, "the task cannot be run as submitted", errors=errors)
        case InvalidCursor():
            errors = [FieldProblem(field="query.cursor", message=str(exc))]
            return ApiError(VALIDATION, str(exc), errors=errors)
        case DocumentRefused():
            problem = DOCUMENT_TOO_LARGE if isinstance(exc, DocumentTooLarge) else DOCUMENT_REFUSED
            errors = [FieldProblem(field="body.file", message=exc.detail)]
            return ApiError(problem, f"the file is not stored: {exc.detail}", errors=errors)
    return None


def error_response(exc: Exception) -> JSONResponse:
    """The problem response of a mapped error (see `_as_api_error`)."""
    error = _as_api_error(exc)
    if error is None:
        raise TypeError(f"{type(exc).__name__} is not a mapped error")
    return problem_response(
        error.problem,
        error.detail,
        errors=error.errors,
        headers=error.headers,
        permission=error.permission,
        extra=error.extra,
    )


def problem_of(exc: Exception) -> Problem | None:
    """The problem a mapped error answers with (see `_as_api_error`), None for any other:
    for protocol adapters that carry it in their own error format (A2A)."""
    error = _as_api_error(exc)
    if error is None:
        return None
    return Problem(
        type=error.problem.uri,
        title=error.problem.title,
        status=error.problem.status,
        detail=error.detail,
        errors=error.errors,
        permission=error.permission,
        **error.extra,
    )


def rate_limit_headers(refusal: QuotaRefusal) -> dict[str, str]:
    """`Retry-After`, and the IETF `RateLimit-Policy` / `RateLimit` fields of a refusal."""
    headers: dict[str, str] = {}
    retry_after = retry_after_header(refusal.retry_after_s)
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    if refusal.window_s is not None:
        headers["RateLimit-Policy"] = (
            f'"{refusal.limit}";q={refusal.limit_value};w={int(refusal.window_s)}'
        )
        reset = f";t={retry_after}" if retry_after is not None else ""
        headers["RateLimit"] = f'"{refusal.limit}";r=0{reset}'
    return headers


async def _domain_error(request: Request, exc: Exception) -> JSONResponse:
    if _as_api_error(exc) is None:
        return await _unexpected(request, exc)
    return error_response(exc)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        FieldProblem(field=".".join(str(part) for part in error["loc"]), message=error["msg"])
        for error in exc.errors()
    ]
    return problem_response(VALIDATION, "the request is not valid; see `errors`", errors=errors)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    problem = _BY_STATUS.get(exc.status_code) or ProblemType(
        "http-error", "HTTP error", exc.status_code
    )
    detail = exc.detail if isinstance(exc.detail, str) else problem.title
    if exc.status_code == 404:
        detail = f"no such resource: {request.url.path}"
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
        headers["Allow"] = ", ".join(_allowed_methods(request))
    return problem_response(problem, detail, headers=headers)


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route of this path takes (Starlette names only the first route's)."""
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )
    ]


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # A store that is unavailable is answered before it gets here (app.api.unavailable).
    logger.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    # Starlette re-raises after this answer and the server then closes the connection: say
    # so, or the client's next request on it fails.
    return problem_response(
        INTERNAL,
        "an unexpected error occurred; it has been logged",
        headers={"Connection": "close"},
    )


def unavailable_response(
    detail: str, *, retry_after_s: float = RETRY_AFTER_S, close: bool = True
) -> JSONResponse:
    """503 `service-unavailable`, to be tried again after `retry_after_s` (with `close`, on a
    new connection): the answer while a store the request needs is unreachable."""
    headers = {"Retry-After": retry_after_header(retry_after_s) or "1"}
    if close:
        headers["Connection"] = "close"
    return problem_response(UNAVAILABLE, detail, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    for domain_error in (
        ApiError,
        AuthenticationFailed,
        NotFound,
        Forbidden,
        TenantRefused,
        TenantExists,
        TaskAlreadyFinished,
        TaskUnfinished,
        InvalidSubmission,
        InvalidCursor,
        DocumentRefused,
        RateLimited,
        AgentArchived,
        AgentExists,
        UnknownAgent,
        ConversationBusy,
    ):
        app.add_exception_handler(domain_error, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for the problem statuses a route can answer."""
    descriptions = {
        400: "Bad request",
        401: "Missing, expired or invalid bearer token",
        403: "The caller's roles do not permit this, or its tenant is unknown or disabled",
        404: "No such resource in the caller's tenant",
        409: "Conflict with the resource's current state",
        413: "The request body is larger than the service accepts",
        422: "Invalid input; `errors` lists each field",
        429: "Over one of the tenant's limits; `Retry-After` says when to retry",
        503: "Not ready, or the database is unavailable; `Retry-After` says when to retry",
    }
    return {
        status: {
            "model": Problem,
            "description": descriptions[status],
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }
