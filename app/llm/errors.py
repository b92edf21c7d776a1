"""Errors of the LLM gateway, independent of any provider's exception types."""

from enum import StrEnum

from app.chain import FailedAttempt
from app.errors import OmniForgeError


class ModelConfigError(OmniForgeError):
    """The model list is unusable; the message says which file, model and field."""


class UnknownModelError(OmniForgeError, LookupError):
    def __init__(self, model: str, known: list[str]) -> None:
        super().__init__(f"unknown model {model!r}; configured models: {', '.join(known)}")
        self.model = model
        self.known = known


class LLMErrorKind(StrEnum):
    TIMEOUT = "timeout"
    RATE_LIMIT = "rate_limit"
    TRANSIENT = "transient"  # 5xx, overloaded, connection failures
    BAD_REQUEST = "bad_request"
    AUTHENTICATION = "authentication"
    CONTEXT_WINDOW = "context_window"
    CONTENT_POLICY = "content_policy"
    NOT_FOUND = "not_found"
    UNKNOWN = "unknown"

    @property
    def retryable(self) -> bool:
        return self in {LLMErrorKind.TIMEOUT, LLMErrorKind.RATE_LIMIT, LLMErrorKind.TRANSIENT}


# Statuses whose kind is not the 4xx/5xx default (a provider's 401 whose body says
# `invalid_request_error`, as OpenAI's do, is still an authentication failure).
_STATUS_KINDS = {
    401: LLMErrorKind.AUTHENTICATION,
    403: LLMErrorKind.AUTHENTICATION,
    404: LLMErrorKind.NOT_FOUND,
    408: LLMErrorKind.TIMEOUT,
    409: LLMErrorKind.TRANSIENT,
    429: LLMErrorKind.RATE_LIMIT,
}


def kind_of_status(status: int) -> LLMErrorKind | None:
    """The kind of a provider's error status; None for one that is not an error."""
    if status in _STATUS_KINDS:
        return _STATUS_KINDS[status]
    if status >= 500:
        return LLMErrorKind.TRANSIENT
    if status >= 400:
        return LLMErrorKind.BAD_REQUEST
    return None


class LLMCallError(OmniForgeError):
    """Every deployment tried for a call failed; `failed_attempts` lists each, in order."""

    def __init__(
        self,
        message: str,
        *,
        kind: LLMErrorKind,
        status_code: int | None = None,
        retry_after_s: float | None = None,
        failed_attempts: list[FailedAttempt] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.status_code = status_code
        self.retry_after_s = retry_after_s
        self.failed_attempts = failed_attempts or []


def after_every_attempt(error: LLMCallError, attempts: list[FailedAttempt]) -> LLMCallError:
    """The error of a call whose every deployment failed (`error` the first one's): worth
    retrying if any deployment's failure was."""
    kind = error.kind
    if not kind.retryable:
        retryable = [a for a in attempts if LLMErrorKind(a.error_class).retryable]
        kind = LLMErrorKind(retryable[-1].error_class) if retryable else kind
    return LLMCallError(
        error.message,
        kind=kind,
        status_code=error.status_code,
        retry_after_s=error.retry_after_s,
        failed_attempts=list(attempts),
    )
