"""What a call came to, and the `tool_result` step that records it: its value rendered and
bounded, its usage, or its failure with an error code; the run's secrets masked first."""

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_jsonable_python

from app.chain import (
    ErrorCode,
    FailedAttempt,
    ReasoningChain,
    ReasoningStep,
    StepType,
    ToolResultInfo,
    ToolType,
    VisibilityConfig,
)
from app.tools.dataflow import result_labels
from app.tools.errors import ErrorClass, GuardRejection, ToolError
from app.tools.models import ToolOutput
from app.tools.preparation import PreparedCall
from app.tools.results import ToolResult, render_result
from app.tools.services import ToolServices


@dataclass(slots=True)
class Outcome:
    """A call's end: its output, or the error or guard rejection that stopped it."""

    output: ToolOutput | None = None
    error: ToolError | None = None
    rejection: GuardRejection | None = None
    attempts: int = 0
    duration_ms: float = 0.0
    failed_attempts: list[FailedAttempt] = field(default_factory=list)


def record_result(
    chain: ReasoningChain, call: PreparedCall, outcome: Outcome, max_result_chars: int
) -> ToolResult:
    """Records the call's `tool_result` step. A value longer than the tool's (or else
    `max_result_chars`) limit is truncated in the step; the result keeps it whole."""
    definition = call.entry.definition if call.entry else None
    output = outcome.output
    error = outcome.error
    started = call.context.started
    child = output.child if output is not None else None if error is None else error.child
    if child is None and started:  # it ended without an answer from the child it started
        child = started[-1]
    services = call.context.services
    if services is not None and services.secrets is not None:
        _redact_outcome(outcome, services)
    call_info = call.call_step.tool_call
    assert call_info is not None
    common: dict[str, Any] = {
        "correlation_id": call.context.correlation_id,
        "tool_type": call_info.tool_type,
        "tool_name": call_info.tool_name,
        "duration_ms": outcome.duration_ms,
        "attempts": outcome.attempts,
        "failed_attempts": outcome.failed_attempts,
    }
    if output is not None:
        limit = (definition.max_result_chars if definition else None) or max_result_chars
        if definition is not None and definition.type is ToolType.LLM:
            # A reply is bounded by its output tokens already, and a resumed run replays
            # it from the step: it is stored whole.
            limit = sys.maxsize
        rendered, truncated, original_chars = render_result(output.value, limit)
        known_tokens = output.input_tokens is not None and output.output_tokens is not None
        usage: dict[str, Any] = {
            "model": output.model or call_info.model,
            "provider": output.provider,
            "deployment": output.deployment,
            "input_tokens": output.input_tokens,
            "output_tokens": output.output_tokens,
            "total_tokens": (output.input_tokens or 0) + (output.output_tokens or 0)
            if known_tokens
            else None,
            "cost_usd": output.cost_usd,
            "unpriced": output.unpriced,
            "sandbox_s": output.sandbox_s,
        }
        if child is not None:
            usage.update(child.result_fields())
        info = ToolResultInfo(
            success=True,
            result=rendered,
            truncated=truncated,
            original_chars=original_chars,
            cached=output.cached,
            labels=[] if definition is None else result_labels(definition, output),
            **usage,
            **common,
        )
    else:
        code, message = _failure(definition.type if definition else None, outcome)
        # What a failed call used all the same (a sandbox call stopped at a limit).
        used: dict[str, Any] = (
            {"sandbox_s": error.sandbox_s, "cost_usd": error.cost_usd}
            if error is not None and error.sandbox_s is not None
            else {}
        )
        info = ToolResultInfo(
            success=False,
            error=message,
            error_code=code,
            model=call_info.model,
            **common,
            **used,
            **({} if child is None else child.result_fields()),
        )
    summary = call.entry.tool.summarize(info) if call.entry else f"{info.error_code}"
    result_step = chain.add_step(
        ReasoningStep(
            type=StepType.TOOL_RESULT,
            tool_result=info,
            visibility=VisibilityConfig(level=call.call_step.visibility.level, summary=summary),
            parent_step_id=call.call_step.id,
        )
    )
    _flowed(call, info)
    billed = child is not None and child.billed
    if output is None:
        return ToolResult(call.call_step, result_step, billed_elsewhere=billed)
    return ToolResult(
        call.call_step, result_step, output.value, output.images, billed_elsewhere=billed
    )


def replayed(chain: ReasoningChain, call: PreparedCall, recorded: ReasoningStep) -> ToolResult:
    """A replayed call's result, as the stored step says: its value (an LLM reply is stored
    whole), no images (they are not stored), nothing billed or guarded again."""
    result_step = chain.add_step(recorded)
    info = result_step.tool_result
    assert info is not None
    _flowed(call, info)
    value = info.result if info.success else None
    return ToolResult(call.call_step, result_step, value)


def has_usage(info: ToolResultInfo) -> bool:
    return (
        info.unpriced
        or info.cost_usd is not None
        or info.total_tokens is not None
        or info.sandbox_s is not None
    )


def attempt_failures(error: ToolError, attempt: int, backoff: float | None) -> list[FailedAttempt]:
    """How one failed attempt is reported: the failures the tool reports inside it (each of
    a provider's deployments), else the error itself; the last with the backoff after it."""
    inner = [with_attempt(f, attempt) for f in error.failed_attempts]
    if not inner:
        inner = [
            FailedAttempt(
                attempt=attempt,
                error_class=error.error_class,
                message=error.message,
                status_code=error.status_code,
            )
        ]
    inner[-1].backoff_s = backoff
    return inner


def with_attempt(failure: FailedAttempt, attempt: int) -> FailedAttempt:
    return failure.model_copy(update={"attempt": attempt})


def _redact_outcome(outcome: Outcome, services: ToolServices) -> None:
    """Masks the run's secret values in what a call returned or said of its failure, before
    anything of it is recorded, streamed, audited or shown to the model."""
    if outcome.output is not None:
        outcome.output.value = _redacted_value(outcome.output.value, services)
    if outcome.error is not None:
        outcome.error.message = services.redact(outcome.error.message)
    for failure in outcome.failed_attempts:
        failure.message = services.redact(failure.message)


def _redacted_value(value: Any, services: ToolServices) -> Any:
    if isinstance(value, str):
        return services.redact(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    text = json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False)
    masked = services.redact(text)
    return value if masked == text else json.loads(masked)


def _failure(tool_type: ToolType | None, outcome: Outcome) -> tuple[ErrorCode, str]:
    if outcome.rejection is not None:
        return outcome.rejection.error_code, outcome.rejection.message
    error = outcome.error or ToolError("tool call failed")
    if error.error_code is not None:
        return error.error_code, error.message
    if error.error_class is ErrorClass.TIMEOUT:
        return ErrorCode.TIMEOUT, error.message
    if error.error_class is ErrorClass.INVALID_ARGUMENTS:
        return ErrorCode.INVALID_ARGUMENTS, error.message
    fallback = ErrorCode.LLM_ERROR if tool_type is ToolType.LLM else ErrorCode.TOOL_ERROR
    return fallback, error.message


def _flowed(call: PreparedCall, info: ToolResultInfo) -> None:
    """What a result (made or replayed) brought into its run's context, and where its call
    went if it was made, for the run's data flow."""
    gate = call.context.approvals
    if gate is None or call.entry is None:
        return
    if info.attempts:
        gate.flow.called(call.entry.definition, call.arguments)
    if info.labels:
        gate.flow.took_in(call.entry.definition.name, info.labels)
