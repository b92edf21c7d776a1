"""The base of OmniForge's own errors, and the catalogue of problem types a client can meet.

Every error the code raises on purpose is an `OmniForgeError`: it says what went wrong in the
words of the domain (a task, an agent, a tenant) and knows nothing of HTTP, JSON-RPC or any
other transport. The adapters (REST, A2A, the OpenAI-compatible endpoint) answer each with a
problem type (RFC 9457) found by one table, along the error's class hierarchy
(`app.api.errors`); the types themselves are listed here, with what each means, so that the
documentation's error table is this module's catalogue and nothing else.

This module imports nothing of ours: every layer, the lowest included, may raise from it."""

from dataclasses import dataclass

PROBLEM_BASE = "https://omniforge.dev/problems/"


class OmniForgeError(Exception):
    """An error OmniForge raises on purpose. Subclasses say what happened, in the domain's
    words; which problem a client is answered with is the adapters' table, not theirs. One
    that reaches a client unmapped is answered as `internal-error` (and logged)."""


class NotFound(OmniForgeError):
    """No such resource in the caller's tenant (another tenant's ids are not found either)."""

    def __init__(self, kind: str, resource_id: object) -> None:
        super().__init__(f"{kind} {resource_id} not found")
        self.kind = kind
        self.resource_id = resource_id


class Forbidden(OmniForgeError):
    """The caller is known but may not do this; `permission` names what it lacks."""

    def __init__(self, message: str, *, permission: str | None = None) -> None:
        super().__init__(message)
        self.permission = permission


@dataclass(frozen=True, slots=True)
class ProblemType:
    """One kind of problem: its stable `type` (`uri`), a short title, the HTTP status it is
    answered with, and what it means to a client (the documentation's words)."""

    slug: str
    title: str
    status: int
    description: str = ""

    @property
    def uri(self) -> str:
        return PROBLEM_BASE + self.slug


_CATALOGUE: list[ProblemType] = []


def _problem(slug: str, title: str, status: int, description: str) -> ProblemType:
    problem = ProblemType(slug, title, status, description)
    _CATALOGUE.append(problem)
    return problem


BAD_REQUEST = _problem(
    "bad-request",
    "Bad request",
    400,
    "The request cannot be read at all: a malformed multipart body, a header that is not "
    "what the route needs.",
)
UNAUTHORIZED = _problem(
    "unauthorized",
    "Authentication required",
    401,
    "No bearer token (or API key), or one that is expired, malformed or signed by a key "
    "the service does not trust. `WWW-Authenticate` says which.",
)
FORBIDDEN = _problem(
    "forbidden",
    "Permission denied",
    403,
    "The caller's roles lack a permission (`permission` names it), or a task names tools "
    "its roles may not use (`errors` names each).",
)
TENANT_UNKNOWN = _problem(
    "tenant-unknown",
    "Unknown tenant",
    403,
    "The credential names a tenant this service does not know.",
)
TENANT_DISABLED = _problem(
    "tenant-disabled",
    "Tenant disabled",
    403,
    "The credential's tenant exists but an operator disabled it.",
)
NOT_FOUND = _problem(
    "not-found",
    "Not found",
    404,
    "No such resource in the caller's tenant (another tenant's ids answer this too).",
)
METHOD_NOT_ALLOWED = _problem(
    "method-not-allowed",
    "Method not allowed",
    405,
    "The path exists but not with this method; `Allow` lists the methods it takes.",
)
TENANT_EXISTS = _problem(
    "tenant-exists", "Tenant already exists", 409, "A tenant with that id already exists."
)
TASK_FINISHED = _problem(
    "task-finished",
    "Task already finished",
    409,
    "The task has ended, so it can no longer be cancelled, resumed or changed.",
)
TASK_UNFINISHED = _problem(
    "task-unfinished",
    "Task not finished yet",
    409,
    "The task is still running: it cannot be erased or replayed until it ends.",
)
AGENT_EXISTS = _problem(
    "agent-exists",
    "Agent already exists",
    409,
    "An agent of that name exists in the tenant (`agent` names it); change it instead.",
)
AGENT_ARCHIVED = _problem(
    "agent-archived",
    "Agent archived",
    409,
    "The agent is archived and takes no new tasks (`agent` names it).",
)
AGENT_BUILTIN = _problem(
    "agent-builtin",
    "Built-in agent",
    409,
    "Built-in agents cannot be changed or archived; define an agent of another name.",
)
MCP_SERVER_EXISTS = _problem(
    "mcp-server-exists",
    "MCP server already exists",
    409,
    "The tenant already has an MCP server of that name.",
)
REMOTE_AGENT_EXISTS = _problem(
    "remote-agent-exists",
    "Remote agent already exists",
    409,
    "The tenant already has a remote agent of that name.",
)
CONVERSATION_BUSY = _problem(
    "conversation-busy",
    "Conversation busy",
    409,
    "A turn of the conversation is still running (`running_task_id`); send the next one "
    "when it ends.",
)
APPROVAL_DECIDED = _problem(
    "approval-decided",
    "Approval already decided",
    409,
    "Someone already approved or rejected this call (or its task ended).",
)
SCHEDULE_UNRESUMABLE = _problem(
    "schedule-unresumable",
    "Schedule cannot resume",
    409,
    "The schedule was paused for a reason that still holds (its agent is gone or archived).",
)
PAYLOAD_TOO_LARGE = _problem(
    "payload-too-large",
    "Request body too large",
    413,
    "The request body (or an uploaded file) is larger than the service accepts.",
)
DOCUMENT_TOO_LARGE = _problem(
    "document-too-large",
    "Document too large to read",
    413,
    "An uploaded document is over the size its reader accepts.",
)
DOCUMENT_REFUSED = _problem(
    "document-refused",
    "Document over its reading limits",
    422,
    "An uploaded document could not be read within its limits (pages, CPU, memory) or is "
    "not the kind it claims; nothing is stored.",
)
VALIDATION = _problem(
    "validation-error",
    "Invalid request",
    422,
    "Some input is not valid; `errors` lists each field (`body.…`, `query.…`, `path.…`) and "
    "what is wrong with it.",
)
MODEL_NOT_APPROVED = _problem(
    "model-not-approved",
    "Model not approved",
    422,
    "The task or agent names a model the tenant has not approved; `approved` lists those it has.",
)
IDEMPOTENCY_KEY_REUSED = _problem(
    "idempotency-key-reused",
    "Idempotency key used with another request",
    422,
    "The `Idempotency-Key` was already used with a different request body.",
)
RATE_LIMITED = _problem(
    "rate-limited",
    "Rate limit reached",
    429,
    "One of the tenant's limits refused the request (`limit` names it); `Retry-After` and "
    "`retry_after_s` say when it admits it.",
)
INTERNAL = _problem(
    "internal-error",
    "Internal server error",
    500,
    "A fault of the service, logged with the request's id. Nothing a client sends should cause it.",
)
UNAVAILABLE = _problem(
    "service-unavailable",
    "Service unavailable",
    503,
    "Not ready yet, a store it needs is unreachable, or a feature this service runs without; "
    "`Retry-After` says when to try again.",
)
HTTP_ERROR = _problem(
    "http-error",
    "HTTP error",
    400,
    "Any other refusal at the HTTP level (such as 416 for a byte range a file does not "
    "have); the problem's `status` is the response's.",
)
# The OpenAI-compatible endpoint's answers for a run that ended without an answer.
TASK_FAILED = _problem(
    "task-failed",
    "The agent's run failed",
    422,
    "OpenAI-compatible endpoint: the run ended without an answer; `error_code` says why "
    "(`max_iterations`, `invalid_output`, `cancelled`…).",
)
BUDGET_EXCEEDED = _problem(
    "budget-exceeded",
    "The task's budget is spent",
    402,
    "OpenAI-compatible endpoint: the run spent the task's budget before it answered.",
)
MODEL_FAILED = _problem(
    "model-failed",
    "The model or a remote tool failed",
    502,
    "OpenAI-compatible endpoint: the model (or a remote tool's server) failed the run.",
)
TASK_INTERRUPTED = _problem(
    "task-interrupted",
    "The run was interrupted",
    503,
    "OpenAI-compatible endpoint: the run was interrupted (a restart) and resumes; ask again.",
)


def problem_catalogue() -> list[ProblemType]:
    """Every problem type a client can be answered with, in the documentation's order."""
    return list(_CATALOGUE)
