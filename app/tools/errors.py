"""Errors of the tool layer: registry lookups, tool failures by class, guard rejections."""

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING

from app.chain import ErrorCode, FailedAttempt
from app.chain.errors import ChainAbort
from app.errors import OmniForgeError

if TYPE_CHECKING:
    from app.tools.models import ChildRun


class ToolRegistryError(OmniForgeError):
    """Base of registry errors."""


class ToolNotFoundError(ToolRegistryError, KeyError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no tool named {name!r} is registered")
        self.name = name

    def __str__(self) -> str:
        return str(self.args[0])


class ToolAlreadyRegisteredError(ToolRegistryError):
    def __init__(self, name: str) -> None:
        super().__init__(f"a tool named {name!r} is already registered (pass replace=True)")
        self.name = name


class ErrorClass(StrEnum):
    """Why an attempt failed; a tool's retry policy names the classes worth retrying."""

    TIMEOUT = "timeout"
    RATE_LIMIT = "rate_limit"
    TRANSIENT = "transient"
    INVALID_ARGUMENTS = "invalid_arguments"
    PERMANENT = "permanent"


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem with one argument; `field` is a dotted path ("" for the whole object)."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class ToolError(OmniForgeError):
    """A tool call failed. Tools raise it (or a subclass) to say how; anything else they raise
    counts as a permanent failure."""

    error_class: ErrorClass = ErrorClass.PERMANENT

    def __init__(
        self,
        message: str,
        *,
        error_class: ErrorClass | None = None,
        error_code: ErrorCode | None = None,
        status_code: int | None = None,
        retry_after_s: float | None = None,
        failed_attempts: list[FailedAttempt] | None = None,
        child: "ChildRun | None" = None,
        sandbox_s: float | None = None,
        cost_usd: Decimal | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if error_class is not None:
            self.error_class = error_class
        self.error_code = error_code
        self.status_code = status_code
        self.retry_after_s = retry_after_s
        # Attempts inside this one (e.g. LLM deployments the router fell back from).
        self.failed_attempts = failed_attempts or []
        # A sub-agent call whose child task failed: the child and what it used all the same.
        self.child = child
        # A sandbox call stopped at a limit: the CPU seconds it used all the same, and their
        # cost (billed and budgeted as a successful call's).
        self.sandbox_s = sandbox_s
        self.cost_usd = cost_usd


class ToolTimeoutError(ToolError):
    error_class = ErrorClass.TIMEOUT


class ToolRateLimitError(ToolError):
    error_class = ErrorClass.RATE_LIMIT


class TransientToolError(ToolError):
    error_class = ErrorClass.TRANSIENT


class InvalidToolArguments(ToolError):
    error_class = ErrorClass.INVALID_ARGUMENTS

    def __init__(self, tool_name: str, field_errors: list[FieldError]) -> None:
        detail = "; ".join(str(e) for e in field_errors)
        super().__init__(f"invalid arguments for {tool_name}: {detail}")
        self.field_errors = field_errors


class GuardRejection(ChainAbort):
    """A guard refused a tool call. The call is recorded as a failed step and not executed;
    unless `ends_run` is false, the run then ends with `error_code`."""

    def __init__(
        self,
        error_code: ErrorCode,
        message: str,
        *,
        ends_run: bool = True,
        details: dict[str, object] | None = None,
    ) -> None:
        super().__init__(error_code, message, details=details)
        self.ends_run = ends_run
