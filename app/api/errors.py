"""One mapping from errors to RFC 9457 problem details (`application/problem+json`)."""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.errors import (
    AGENT_ARCHIVED,
    AGENT_BUILTIN,
    AGENT_EXISTS,
    APPROVAL_DECIDED,
    BAD_REQUEST,
    CONVERSATION_BUSY,
    DOCUMENT_REFUSED,
    DOCUMENT_TOO_LARGE,
    FORBIDDEN,
    HTTP_ERROR,
    IDEMPOTENCY_KEY_REUSED,
    INTERNAL,
    MCP_SERVER_EXISTS,
    METHOD_NOT_ALLOWED,
    MODEL_NOT_APPROVED,
    NOT_FOUND,
    PAYLOAD_TOO_LARGE,
    PROBLEM_BASE,
    RATE_LIMITED,
    REMOTE_AGENT_EXISTS,
    SCHEDULE_UNRESUMABLE,
    TASK_FINISHED,
    TASK_UNFINISHED,
    TENANT_DISABLED,
    TENANT_EXISTS,
    TENANT_UNKNOWN,
    UNAUTHORIZED,
    UNAVAILABLE,
    VALIDATION,
    OmniForgeError,
    ProblemType,
    problem_catalogue,
)
from app.governance.quotas import QuotaRefusal, RateLimited, retry_after_header
from app.resources.agents import AgentArchived, AgentBuiltin, AgentExists, InvalidDefinition
from app.resources.api_keys import RolesExceedCreator
from app.resources.mcp_servers import McpServerExists, McpServersUnavailable
from app.resources.remote_agents import RemoteAgentExists, RemoteAgentsUnavailable, UnusableCard
from app.resources.schedules import ScheduleUnresumable
from app.resources.secrets import SecretsUnavailable, UnsendableSecret
from app.resources.tenants import InvalidSettings
from app.resources.webhooks.service import UnreachableWebhook, WebhooksUnavailable
from app.runs.agents import UnknownAgent
from app.runs.approval_inbox import ApprovalDecided, EditedArgumentsInvalid
from app.runs.errors import (
    Forbidden,
    InvalidSubmission,
    ModelNotApproved,
    NotFound,
    TaskAlreadyFinished,
    TenantRefused,
    ToolsNotPermitted,
)
from app.runs.tasks.idempotency import IdempotencyKeyReused
from app.runs.tasks.replays import UnfinishedSource
from app.security import AuthenticationFailed
from app.storage.erasure import TaskUnfinished
from app.storage.pagination import InvalidCursor
from app.storage.runs import ConversationBusy
from app.storage.tenants import TenantExists
from app.tools.documents import DocumentRefused, DocumentTooLarge
from app.tools.errors import FieldError

__all__ = [  # the problem types, for the routes that name them
    "AGENT_ARCHIVED",
    "AGENT_BUILTIN",
    "AGENT_EXISTS",
    "APPROVAL_DECIDED",
    "BAD_REQUEST",
    "CONVERSATION_BUSY",
    "DOCUMENT_REFUSED",
    "DOCUMENT_TOO_LARGE",
    "FORBIDDEN",
    "IDEMPOTENCY_KEY_REUSED",
    "INTERNAL",
    "MCP_SERVER_EXISTS",
    "METHOD_NOT_ALLOWED",
    "MODEL_NOT_APPROVED",
    "NOT_FOUND",
    "PAYLOAD_TOO_LARGE",
    "PROBLEM_BASE",
    "RATE_LIMITED",
    "REMOTE_AGENT_EXISTS",
    "SCHEDULE_UNRESUMABLE",
    "TASK_FINISHED",
    "TASK_UNFINISHED",
    "TENANT_DISABLED",
    "TENANT_EXISTS",
    "TENANT_UNKNOWN",
    "UNAUTHORIZED",
    "UNAVAILABLE",
    "VALIDATION",
    "ApiError",
    "FieldProblem",
    "Problem",
    "ProblemType",
    "problem_catalogue",
]

logger = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"

# When a client may try again after a 503 for an unreachable database.
RETRY_AFTER_S = 1.0

HTTP_PROBLEMS = {
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


class ApiError(OmniForgeError):
    """A refusal raised by the API layer itself, its problem type chosen where it is raised
    (the input a route reads, a feature this service runs without)."""

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


def _fields(where: str, problems: list[FieldError]) -> list[FieldProblem]:
    return [FieldProblem(field=f"{where}.{p.field}", message=p.message) for p in problems]


def _challenge(exc: AuthenticationFailed) -> dict[str, str]:
    challenge = 'Bearer realm="omniforge"'
    if exc.token_given:  # RFC 6750: no error code when no token was sent
        challenge += f', error="invalid_token", error_description="{exc.reason}"'
    return {"WWW-Authenticate": challenge}


def _document_problem(exc: DocumentRefused) -> ProblemType:
    return DOCUMENT_TOO_LARGE if isinstance(exc, DocumentTooLarge) else DOCUMENT_REFUSED


@dataclass(frozen=True, slots=True)
class Answer:
    """How one class of error is answered: its problem type (`problems[0]`, unless `choose`
    picks another of `problems`), and what of the error the problem carries."""

    problems: tuple[ProblemType, ...]
    choose: Callable[[Any], ProblemType] | None = None
    detail: Callable[[Any], str] = str
    errors: Callable[[Any], list[FieldProblem] | None] = lambda _: None
    headers: Callable[[Any], dict[str, str] | None] = lambda _: None
    members: Callable[[Any], dict[str, Any]] = lambda _: {}

    def of(self, exc: Any) -> "ApiError":
        problem = self.choose(exc) if self.choose is not None else self.problems[0]
        members = self.members(exc)
        return ApiError(
            problem,
            self.detail(exc),
            errors=self.errors(exc),
            headers=self.headers(exc),
            permission=members.pop("permission", None),
            extra=members,
        )


# The one table from errors to problems, looked up along the error's class hierarchy: a class
# without a row is answered as its nearest ancestor's. Every adapter reads it (REST, A2A, the
# OpenAI-compatible endpoint), and the documentation's error table lists its problem types.
ANSWERS: dict[type[OmniForgeError], Answer] = {
    AuthenticationFailed: Answer((UNAUTHORIZED,), detail=lambda e: e.reason, headers=_challenge),
    NotFound: Answer((NOT_FOUND,)),
    Forbidden: Answer((FORBIDDEN,), members=lambda e: {"permission": e.permission}),
    TenantRefused: Answer(
        (TENANT_UNKNOWN, TENANT_DISABLED),
        choose=lambda e: TENANT_DISABLED if e.disabled else TENANT_UNKNOWN,
    ),
    TenantExists: Answer((TENANT_EXISTS,)),
    InvalidSubmission: Answer(
        (VALIDATION,),
        detail=lambda _: "the task cannot be run as submitted",
        errors=lambda e: _fields("body", e.problems),
    ),
    # Not a missing permission but a missing role: `errors` names it per tool.
    ToolsNotPermitted: Answer(
        (FORBIDDEN,),
        detail=lambda _: "the task names tools the caller's roles may not use",
        errors=lambda e: _fields("body", e.problems),
    ),
    ModelNotApproved: Answer(
        (MODEL_NOT_APPROVED,),
        detail=lambda e: f"model {e.model!r} is not approved for this tenant",
        errors=lambda e: _fields("body", e.problems),
        members=lambda e: {"approved": e.approved},
    ),
    TaskAlreadyFinished: Answer((TASK_FINISHED,)),
    TaskUnfinished: Answer((TASK_UNFINISHED,)),
    ApprovalDecided: Answer((APPROVAL_DECIDED,)),
    EditedArgumentsInvalid: Answer((VALIDATION,), errors=lambda e: _fields("body", e.problems)),
    UnfinishedSource: Answer((TASK_UNFINISHED,)),
    IdempotencyKeyReused: Answer(
        (IDEMPOTENCY_KEY_REUSED,),
        detail=lambda e: f"this Idempotency-Key {e.reason}",
        errors=lambda _: [
            FieldProblem(
                field="header.Idempotency-Key", message="already used with a different body"
            )
        ],
    ),
    ScheduleUnresumable: Answer((SCHEDULE_UNRESUMABLE,)),
    SecretsUnavailable: Answer((UNAVAILABLE,)),
    UnsendableSecret: Answer((VALIDATION,), errors=lambda e: _fields("body", e.problems)),
    McpServersUnavailable: Answer((UNAVAILABLE,)),
    McpServerExists: Answer(
        (MCP_SERVER_EXISTS,),
        detail=lambda e: f"{e}; choose another name, or change that server instead",
    ),
    RemoteAgentsUnavailable: Answer((UNAVAILABLE,)),
    RemoteAgentExists: Answer((REMOTE_AGENT_EXISTS,), detail=lambda e: f"{e}; choose another name"),
    UnusableCard: Answer((VALIDATION,), errors=lambda e: _fields("body", e.problems)),
    WebhooksUnavailable: Answer((UNAVAILABLE,)),
    UnreachableWebhook: Answer(
        (VALIDATION,), errors=lambda e: [FieldProblem(field="body.url", message=e.reason)]
    ),
    RolesExceedCreator: Answer(
        (FORBIDDEN,), errors=lambda e: [FieldProblem(field="body.roles", message=str(e))]
    ),
    InvalidSettings: Answer((VALIDATION,), errors=lambda e: _fields("body", e.problems)),
    AgentArchived: Answer((AGENT_ARCHIVED,), members=lambda e: {"agent": e.name}),
    AgentExists: Answer((AGENT_EXISTS,), members=lambda e: {"agent": e.name}),
    AgentBuiltin: Answer((AGENT_BUILTIN,), members=lambda e: {"agent": e.name}),
    InvalidDefinition: Answer(
        (VALIDATION,),
        errors=lambda e: [
            FieldProblem(field=".".join(["body", *filter(None, [p.field])]), message=p.message)
            for p in e.problems
        ],
    ),
    UnknownAgent: Answer(
        (VALIDATION,), errors=lambda e: [FieldProblem(field="body.agent", message=str(e))]
    ),
    ConversationBusy: Answer(
        (CONVERSATION_BUSY,),
        members=lambda e: {} if e.running is None else {"running_task_id": str(e.running)},
    ),
    RateLimited: Answer(
        (RATE_LIMITED,),
        headers=lambda e: rate_limit_headers(e.refusal),
        members=lambda e: {"limit": e.refusal.limit, "retry_after_s": e.refusal.retry_after_s},
    ),
    InvalidCursor: Answer(
        (VALIDATION,), errors=lambda e: [FieldProblem(field="query.cursor", message=str(e))]
    ),
    DocumentRefused: Answer(
        (DOCUMENT_REFUSED, DOCUMENT_TOO_LARGE),
        choose=_document_problem,
        detail=lambda e: f"the file is not stored: {e.detail}",
        errors=lambda e: [FieldProblem(field="body.file", message=e.detail)],
    ),
}


def answer_for(kind: type[BaseException]) -> Answer | None:
    """The row of the table that answers errors of this class (its own, or its nearest
    ancestor's); None for one the table does not answer (a fault: `internal-error`)."""
    for ancestor in kind.__mro__:
        answer = ANSWERS.get(ancestor)
        if answer is not None:
            return answer
    return None


def _as_api_error(exc: BaseException) -> ApiError | None:
    if isinstance(exc, ApiError):
        return exc
    answer = answer_for(type(exc))
    return None if answer is None else answer.of(exc)


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
        # Not the client's to hear of: on to the outer layers (an unreachable store is
        # answered 503 by `app.api.unavailable`; anything else is a fault, `internal-error`).
        raise exc
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
    problem = HTTP_PROBLEMS.get(exc.status_code) or ProblemType(
        HTTP_ERROR.slug, HTTP_ERROR.title, exc.status_code, HTTP_ERROR.description
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
    # Starlette too finds a handler along the error's classes: one for all of ours.
    app.add_exception_handler(OmniForgeError, _domain_error)
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
