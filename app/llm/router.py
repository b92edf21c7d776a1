"""LiteLLM's Router, made to report every deployment it tried, and its errors classified."""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from app.chain import FailedAttempt
from app.llm.errors import LLMCallError, LLMErrorKind, kind_of_status
from app.llm.litellm_env import Router, deployment_has_io_token_limits, litellm

_attempts: ContextVar[list[FailedAttempt] | None] = ContextVar("llm_attempts", default=None)

_MAX_MESSAGE_CHARS = 300
_LITELLM_PREFIX = re.compile(r"^(?:(?:litellm\.)?[A-Za-z]+Error:\s*)+")


class TrackingRouter(Router):  # type: ignore[misc]  # LiteLLM is untyped
    """A Router that notes, in the calling task's context, each deployment that failed.

    The Router's fallback and retry loops call `_acompletion` once per deployment tried, in
    the caller's task, so a context variable collects the failures of exactly one call.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tracks_usage = any(_has_usage_limits(d) for d in self.model_list)

    async def _increment_deployment_usage(self, **kwargs: Any) -> Any:
        # LiteLLM returns early when no deployment has tpm/rpm limits, but only after
        # deep-copying the deployment's model info on every call; skip straight to that.
        if not self._tracks_usage:
            return None
        return await super()._increment_deployment_usage(**kwargs)

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


def _has_usage_limits(deployment: dict[str, Any]) -> bool:
    sections = [
        deployment,
        deployment.get("litellm_params") or {},
        deployment.get("model_info") or {},
    ]
    return any(
        section.get(key) is not None for section in sections for key in ("tpm", "rpm")
    ) or bool(deployment_has_io_token_limits(deployment))


@contextmanager
def tracking_attempts() -> Iterator[list[FailedAttempt]]:
    """Collects the failed deployment attempts of the router calls made inside the block."""
    attempts: list[FailedAttempt] = []
    token = _attempts.set(attempts)
    try:
        yield attempts
    finally:
        _attempts.reset(token)


# Errors whose class says more than their HTTP status (context-window and content-policy errors
# are 400s; "no deployment available" has no status at all).
_SPECIFIC_KINDS: tuple[tuple[str, LLMErrorKind], ...] = (
    ("ContextWindowExceededError", LLMErrorKind.CONTEXT_WINDOW),
    ("ContentPolicyViolationError", LLMErrorKind.CONTENT_POLICY),
    ("Timeout", LLMErrorKind.TIMEOUT),
    ("RouterRateLimitError", LLMErrorKind.RATE_LIMIT),
)
_CLASS_KINDS: tuple[tuple[str, LLMErrorKind], ...] = (
    ("RateLimitError", LLMErrorKind.RATE_LIMIT),
    ("AuthenticationError", LLMErrorKind.AUTHENTICATION),
    ("PermissionDeniedError", LLMErrorKind.AUTHENTICATION),
    ("NotFoundError", LLMErrorKind.NOT_FOUND),
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
    lines = str(getattr(exc, "message", None) or exc).strip().splitlines()
    # LiteLLM prefixes its messages with the class name, sometimes twice over
    # ("litellm.RateLimitError: RateLimitError: OpenAIException - ..."): say it once.
    detail = _LITELLM_PREFIX.sub("", lines[0] if lines else "") or "no detail"
    return LLMCallError(
        f"{type(exc).__name__}: {detail[:_MAX_MESSAGE_CHARS]}",
        kind=_kind(exc, status_code),
        status_code=status_code,
        retry_after_s=_retry_after(exc),
    )


def _kind(exc: BaseException, status_code: int | None) -> LLMErrorKind:
    if (kind := _kind_by_class(exc, _SPECIFIC_KINDS)) is not None:
        return kind
    # LiteLLM maps a provider's 401 whose body says `invalid_request_error` (as OpenAI's do)
    # to BadRequestError: the status is the more reliable signal.
    if status_code is not None and (kind := kind_of_status(status_code)) is not None:
        return kind
    if (kind := _kind_by_class(exc, _CLASS_KINDS)) is not None:
        return kind
    if isinstance(exc, TimeoutError):
        return LLMErrorKind.TIMEOUT
    return LLMErrorKind.UNKNOWN


def _kind_by_class(
    exc: BaseException, table: tuple[tuple[str, LLMErrorKind], ...]
) -> LLMErrorKind | None:
    for name, kind in table:
        error_type = getattr(litellm, name, None)
        if isinstance(error_type, type) and isinstance(exc, error_type):
            return kind
    return None


def _retry_after(exc: BaseException) -> float | None:
    cooldown = getattr(exc, "cooldown_time", None)  # every deployment is cooling down
    if isinstance(cooldown, int | float):
        return float(cooldown)
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or getattr(exc, "litellm_response_headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date; the retry policy's own backoff applies
