"""Errors the client raises: one class per problem `type` the API answers with (RFC 9457
`application/problem+json`), so callers catch what they mean, not status codes."""

from typing import Any

import httpx

PROBLEM_BASE = "https://omniforge.dev/problems/"


class OmniForgeError(Exception):
    """Everything this client raises derives from this."""


class StreamInterrupted(OmniForgeError):
    """A task's stream kept breaking off before its `done` event, past the retries allowed.
    `last_event_id` is the last event received: `stream(task_id, after=last_event_id)` goes
    on from there."""

    def __init__(self, message: str, *, last_event_id: int | None) -> None:
        super().__init__(message)
        self.last_event_id = last_event_id


class FieldError:
    """One invalid input: `field` is a dotted path (`body.input`, `query.cursor`)."""

    __slots__ = ("field", "message")

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message

    def __repr__(self) -> str:
        return f"FieldError({self.field!r}, {self.message!r})"


class APIError(OmniForgeError):
    """The API refused a request. `type` is the problem's stable URI (`slug` its last part),
    `detail` says why for humans, `body` is the whole problem as received (further members
    such as `permission`, `limit` or `agent` are there)."""

    def __init__(self, response: httpx.Response, body: dict[str, Any]) -> None:
        self.response = response
        self.body = body
        self.status: int = response.status_code
        self.type: str = str(body.get("type") or "about:blank")
        self.title: str = str(body.get("title") or response.reason_phrase)
        self.detail: str = str(body.get("detail") or self.title)
        raw_errors = body.get("errors") or []
        self.errors: list[FieldError] = [
            FieldError(str(item.get("field", "")), str(item.get("message", "")))
            for item in raw_errors
            if isinstance(item, dict)
        ]
        super().__init__(f"{self.status} {self.slug}: {self.detail}")

    @property
    def slug(self) -> str:
        return self.type.removeprefix(PROBLEM_BASE)


class BadRequest(APIError):
    pass


class Unauthorized(APIError):
    """No token, or one the service does not accept (expired, wrongly signed, revoked)."""


class Forbidden(APIError):
    """The caller's roles lack a permission (`permission` names it) or a tool's role."""

    @property
    def permission(self) -> str | None:
        value = self.body.get("permission")
        return None if value is None else str(value)


class TenantRefused(Forbidden):
    """The token's tenant is unknown (`tenant-unknown`) or disabled (`tenant-disabled`)."""


class NotFound(APIError):
    """No such resource for the caller: also what another tenant's ids answer."""


class MethodNotAllowed(APIError):
    pass


class Conflict(APIError):
    """The resource's state does not allow the request."""


class TaskFinished(Conflict):
    pass


class TaskUnfinished(Conflict):
    """The task has not finished: it cannot be replayed (or erased) yet."""


class TaskRunningElsewhere(Conflict):
    @property
    def runner(self) -> str | None:
        value = self.body.get("runner")
        return None if value is None else str(value)


class TenantExists(Conflict):
    pass


class AgentExists(Conflict):
    pass


class AgentArchived(Conflict):
    pass


class AgentBuiltin(Conflict):
    pass


class McpServerExists(Conflict):
    pass


class RemoteAgentExists(Conflict):
    """The tenant has a remote A2A agent (or an MCP server) of that name already."""


class ApprovalDecided(Conflict):
    """The tool call was decided already (or denied by its timeout)."""


class ConversationBusy(Conflict):
    @property
    def running_task_id(self) -> str | None:
        value = self.body.get("running_task_id")
        return None if value is None else str(value)


class ScheduleUnresumable(APIError):
    """The schedule's cron has no firing in sight (it was paused for that): change it first."""


class PayloadTooLarge(APIError):
    pass


class DocumentTooLarge(PayloadTooLarge):
    """An uploaded document has more pages, or needs more memory, than may be read."""


class ValidationFailed(APIError):
    """Invalid input; `errors` name each offending field."""


class DocumentRefused(ValidationFailed):
    """An uploaded document took longer to read than its limits allow (CPU or wall time)."""


class IdempotencyKeyReused(ValidationFailed):
    """The `Idempotency-Key` was used with another request within its lifetime."""


class ModelNotApproved(ValidationFailed):
    @property
    def approved(self) -> list[str]:
        return [str(name) for name in self.body.get("approved") or []]


class RateLimited(APIError):
    """Over one of the tenant's limits (`limit`); `retry_after` is in seconds, None when the
    service cannot know (a concurrent-runs limit)."""

    @property
    def limit(self) -> str | None:
        value = self.body.get("limit")
        return None if value is None else str(value)

    @property
    def retry_after(self) -> float | None:
        value = self.body.get("retry_after_s")
        if isinstance(value, int | float):
            return float(value)
        header = self.response.headers.get("Retry-After")
        try:
            return None if header is None else float(header)
        except ValueError:
            return None


class ServerError(APIError):
    pass


class ServiceUnavailable(ServerError):
    pass


class OtherHTTPError(APIError):
    """A refusal at the HTTP level with no type of its own (`status` says which)."""


class TaskFailed(ValidationFailed):
    """OpenAI-compatible endpoint: the run ended without an answer (`error_code` says why)."""


class BudgetExceeded(APIError):
    """OpenAI-compatible endpoint: the run spent the task's budget before it answered."""


class ModelFailed(ServerError):
    """OpenAI-compatible endpoint: the model (or a remote tool's server) failed the run."""


class TaskInterrupted(ServiceUnavailable):
    """OpenAI-compatible endpoint: the run was interrupted and resumes; ask again."""


_BY_SLUG: dict[str, type[APIError]] = {
    "bad-request": BadRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "tenant-unknown": TenantRefused,
    "tenant-disabled": TenantRefused,
    "not-found": NotFound,
    "method-not-allowed": MethodNotAllowed,
    "task-finished": TaskFinished,
    "task-unfinished": TaskUnfinished,
    "idempotency-key-reused": IdempotencyKeyReused,
    "task-running-elsewhere": TaskRunningElsewhere,
    "tenant-exists": TenantExists,
    "agent-exists": AgentExists,
    "agent-archived": AgentArchived,
    "agent-builtin": AgentBuiltin,
    "mcp-server-exists": McpServerExists,
    "remote-agent-exists": RemoteAgentExists,
    "conversation-busy": ConversationBusy,
    "approval-decided": ApprovalDecided,
    "payload-too-large": PayloadTooLarge,
    "document-too-large": DocumentTooLarge,
    "document-refused": DocumentRefused,
    "schedule-unresumable": ScheduleUnresumable,
    "validation-error": ValidationFailed,
    "model-not-approved": ModelNotApproved,
    "rate-limited": RateLimited,
    "internal-error": ServerError,
    "service-unavailable": ServiceUnavailable,
    "http-error": OtherHTTPError,
    "task-failed": TaskFailed,
    "budget-exceeded": BudgetExceeded,
    "model-failed": ModelFailed,
    "task-interrupted": TaskInterrupted,
}

# A problem type this client does not know yet (or a response from something in between, not
# a problem at all) still gets the class of its status.
_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
    422: ValidationFailed,
    429: RateLimited,
    503: ServiceUnavailable,
}


def error_from(response: httpx.Response) -> APIError:
    """The typed error of a refused request; its body must have been read."""
    body: dict[str, Any]
    try:
        parsed = response.json()
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        body = parsed
    else:
        body = {"detail": response.text.strip()[:500] or response.reason_phrase}
    slug = str(body.get("type", "")).removeprefix(PROBLEM_BASE)
    cls = _BY_SLUG.get(slug)
    if cls is None:
        status = response.status_code
        cls = _BY_STATUS.get(status, ServerError if status >= 500 else APIError)
    return cls(response, body)
