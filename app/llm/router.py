"""LiteLLM's Router, made to report every deployment it tried, and its errors classified."""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from app.chain import FailedAttempt
from app.llm.errors import LLMCallError, LLMErrorKind
from app.llm.litellm_env import Router, litellm

_attempts: ContextVar[list[FailedAttempt] | None] = ContextVar("llm_attempts", default=None)

_MAX_MESSAGE_CHARS = 300


class TrackingRouter(Router):  # type: ignore[misc]  # LiteLLM is untyped
    """A Router that notes, in the calling task's context, each deployment that failed.

    The Router's fallback and retry loops call `_acompletion` once per deployment tried, in
    the caller's task, so a context variable collects the failures of exactly one call.
    """

    async def _acompletion(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        try:
            return await super()._acompletion(model, messages, **kwargs)
        except Exception as exc:
            attempts = _attempts.get()
            if attempts is not None:
                error = classify(exc)
                attempts.append(
                    FailedAttempt(
                        attempt=1,
                        error_class=error.kind,
                        message=error.message,
                        deployment=getattr(exc, "failed_deployment_id", None),
                        model=model,
                        status_code=error.status_code,
                    )
                )
            raise


@contextmanager
def tracking_attempts() -> Iterator[list[FailedAttempt]]:
    """Collects the failed deployment attempts of the router calls made inside the block."""
    attempts: list[FailedAttempt] = []
    token = _attempts.set(attempts)
    try:
        yield attempts
    finally:
        _attempts.reset(token)


# Most specific first: LiteLLM's context-window and content-policy errors are BadRequestErrors.
_KINDS: tuple[tuple[str, LLMErrorKind], ...] = (
    ("ContextWindowExceededError", LLMErrorKind.CONTEXT_WINDOW),
    ("ContentPolicyViolationError", LLMErrorKind.CONTENT_POLICY),
    ("Timeout", LLMErrorKind.TIMEOUT),
    ("RateLimitError", LLMErrorKind.RATE_LIMIT),
    ("AuthenticationError", LLMErrorKind.AUTHENTICATION),
    ("PermissionDeniedError", LLMErrorKind.AUTHENTICATION),
    ("NotFoundError", LLMErrorKind.NOT_FOUND),
    ("UnsupportedParamsError", LLMErrorKind.BAD_REQUEST),
    ("BadRequestError", LLMErrorKind.BAD_REQUEST),
    ("UnprocessableEntityError", LLMErrorKind.BAD_REQUEST),
    ("InternalServerError", LLMErrorKind.TRANSIENT),
    ("ServiceUnavailableError", LLMErrorKind.TRANSIENT),
    ("BadGatewayError", LLMErrorKind.TRANSIENT),
    ("APIConnectionError", LLMErrorKind.TRANSIENT),
)


def classify(exc: BaseException) -> LLMCallError:
    """Maps a LiteLLM (or OpenAI SDK) exception to a provider-independent error."""
    if isinstance(exc, LLMCallError):
        return exc
    status = getattr(exc, "status_code", None)
    status_code = status if isinstance(status, int) else None
    kind = _kind(exc, status_code)
    text = str(getattr(exc, "message", None) or exc).strip().splitlines()
    first_line = text[0] if text else type(exc).__name__
    return LLMCallError(
        f"{type(exc).__name__}: {first_line[:_MAX_MESSAGE_CHARS]}",
        kind=kind,
        status_code=status_code,
        retry_after_s=_retry_after(exc),
    )


def _kind(exc: BaseException, status_code: int | None) -> LLMErrorKind:
    for name, kind in _KINDS:
        error_type = getattr(litellm, name, None)
        if isinstance(error_type, type) and isinstance(exc, error_type):
            return kind
    if isinstance(exc, TimeoutError):
        return LLMErrorKind.TIMEOUT
    if status_code == 429:
        return LLMErrorKind.RATE_LIMIT
    if status_code is None:
        return LLMErrorKind.UNKNOWN
    if status_code >= 500 or status_code in (408, 409):
        return LLMErrorKind.TRANSIENT
    return LLMErrorKind.BAD_REQUEST


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or getattr(exc, "litellm_response_headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date; the retry policy's own backoff applies
