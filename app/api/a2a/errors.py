"""Our domain errors as A2A errors, in one table. The SDK renders them in each binding's own
format (a JSON-RPC `error`, an HTTP+JSON `google.rpc.Status`); the problem our REST API would
answer rides along as the error's data (`type`, `status`, `errors`...), so a client can tell
why exactly.

A2A has no error for a refusal by role or a rate limit: those are `UnsupportedOperation`
(the binding's FAILED_PRECONDITION) and `InvalidRequest`, their problem naming them."""

from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from app.api.errors import (
    AGENT_ARCHIVED,
    CONVERSATION_BUSY,
    FORBIDDEN,
    MODEL_NOT_APPROVED,
    NOT_FOUND,
    RATE_LIMITED,
    TASK_FINISHED,
    VALIDATION,
    problem_of,
)
from app.chain import ErrorCode
from app.runs.errors import NotFound
from app.runs.tasks.hops import Hops

_BY_PROBLEM: dict[str, type[A2AError]] = {
    TASK_FINISHED.uri: TaskNotCancelableError,
    CONVERSATION_BUSY.uri: UnsupportedOperationError,
    AGENT_ARCHIVED.uri: UnsupportedOperationError,
    FORBIDDEN.uri: UnsupportedOperationError,
    VALIDATION.uri: InvalidParamsError,
    MODEL_NOT_APPROVED.uri: InvalidParamsError,
    RATE_LIMITED.uri: InvalidRequestError,
}


def a2a_error(exc: Exception) -> A2AError | None:
    """The A2A error of one of our mapped errors; None for any other (a bug: the SDK answers
    it as an internal error)."""
    if isinstance(exc, A2AError):
        return exc
    problem = problem_of(exc)
    if problem is None:
        return None
    data = problem.model_dump(mode="json", exclude_none=True)
    if isinstance(exc, NotFound) and exc.kind == "task":
        return TaskNotFoundError(problem.detail, data)
    if problem.type == NOT_FOUND.uri:  # a conversation (`context_id`), a file...
        return InvalidParamsError(problem.detail, data)
    kind = _BY_PROBLEM.get(problem.type, InvalidRequestError)
    return kind(problem.detail, data)


def task_not_found(task_id: str) -> TaskNotFoundError:
    return TaskNotFoundError(f"task {task_id} not found")


def only_text(kinds: list[str]) -> ContentTypeNotSupportedError:
    return ContentTypeNotSupportedError(
        f"only text parts are supported; this message has {', '.join(kinds)} parts (give "
        "files through /api/v1/files)",
        {"supported": ["text/plain"]},
    )


def refuse_looping(agent: str, hops: Hops, *, max_depth: int) -> None:
    """Refuses a message whose task would be `agent`'s again above it, or too deep."""
    if agent in hops.agents:
        path = " -> ".join([*reversed(hops.agents), agent])
        raise UnsupportedOperationError(
            f"agent {agent!r} already works above this message, which came back through "
            f"remote agents ({path}): an agent may not call itself, directly or through others",
            {"error_code": ErrorCode.AGENT_CYCLE.value},
        )
    if hops.depth > max_depth:
        raise UnsupportedOperationError(
            f"agent {agent!r} would run at depth {hops.depth}, counted across the remote-agent "
            f"calls that led here: this service nests agents at most {max_depth} deep "
            "(OMNIFORGE_MAX_AGENT_DEPTH)",
            {"error_code": ErrorCode.AGENT_DEPTH_EXCEEDED.value},
        )
