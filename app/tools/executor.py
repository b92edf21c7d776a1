"""The one path every tool call takes: validate, guard, run with timeout and retries, record."""

import asyncio
import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn
from uuid import uuid4

from pydantic_core import to_jsonable_python

from app.bulkheads import TenantThreads
from app.chain import (
    ErrorCode,
    FailedAttempt,
    ReasoningChain,
    ReasoningStep,
    StepType,
    ToolCallInfo,
    ToolResultInfo,
    ToolType,
    VisibilityConfig,
    VisibilityLevel,
)
from app.tools.approvals import (
    ApprovalGate,
    ApprovalPending,
    ApprovalStatus,
    Decision,
    PendingApproval,
)
from app.tools.cache import ToolResultCache, cache_key
from app.tools.dataflow import result_labels
from app.tools.errors import (
    ErrorClass,
    FieldError,
    GuardRejection,
    InvalidToolArguments,
    ToolError,
    ToolTimeoutError,
)
from app.tools.guards import PendingCall, ToolGuard
from app.tools.models import ToolCallContext, ToolOutput
from app.tools.recording import CostRecord, CostRecorder
from app.tools.registry import RegisteredTool, ToolRegistry
from app.tools.results import ToolInvocation, ToolResult, render_result
from app.tools.services import ToolServices
from app.tools.validation import argument_errors

logger = logging.getLogger(__name__)

DEFAULT_MAX_RESULT_CHARS = 16_000


@dataclass(slots=True)
class _Prepared:
    invocation: ToolInvocation
    entry: RegisteredTool | None
    arguments: dict[str, Any]
    context: ToolCallContext
    call_step: ReasoningStep
    failure: ToolError | None = None
    pending: PendingCall | None = None
    # The guards that let the call through; each gets after_call or abandon, once.
    passed: list[ToolGuard] = field(default_factory=list)
    settled: bool = False
    # Its stored result step, when a resumed run replays it: it is not made again.
    recorded: ReasoningStep | None = None
    # It is to wait for a human's decision (and why, beyond its policy).
    waits: bool = False
    note: str | None = None


@dataclass(slots=True)
class _Outcome:
    output: ToolOutput | None = None
    error: ToolError | None = None
    rejection: GuardRejection | None = None
    attempts: int = 0
    duration_ms: float = 0.0
    failed_attempts: list[FailedAttempt] = field(default_factory=list)


class ToolExecutor:
    """Runs tool calls and records each as a `tool_call` and a `tool_result` step.

    A bad call (unknown tool, invalid arguments, a tool that raises or times out) becomes a
    failed result, never an exception. Only a guard rejection that ends the run, and
    cancellation, propagate, after the steps are recorded.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        guards: Sequence[ToolGuard] = (),
        recorder: CostRecorder | None = None,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        cache: ToolResultCache | None = None,
        threads: TenantThreads | None = None,
    ) -> None:
        """`threads`: the worker threads a tenant's arguments are checked in when their schema
        has patterns, shared with the process's other per-tenant CPU work."""
        self.registry = registry
        self.threads = threads or TenantThreads()
        self._guards = tuple(guards)
        self._recorder = recorder
        # Results of tools with a `cache_ttl_seconds`, by tenant, tool and arguments.
        self._cache = cache if cache is not None else ToolResultCache()
        self._max_result_chars = max_result_chars
        self._sleep = sleep

    async def execute(
        self,
        chain: ReasoningChain,
        context: ToolCallContext,
        name: str,
        arguments: dict[str, Any] | str,
        *,
        visibility: VisibilityLevel | None = None,
        recorded_arguments: dict[str, Any] | None = None,
    ) -> ToolResult:
        [result] = await self.execute_batch(
            chain, context, [ToolInvocation(name, arguments, visibility, recorded_arguments)]
        )
        return result

    async def execute_batch(
        self,
        chain: ReasoningChain,
        context: ToolCallContext,
        invocations: Sequence[ToolInvocation],
    ) -> list[ToolResult]:
        """Runs independent calls concurrently. All `tool_call` steps are recorded first, in
        order; each `tool_result` step follows in the same order, as soon as it and every
        earlier call are done. Nothing starts while the run's `ready` holds it back."""
        if context.ready is not None:
            await context.ready()
        prepared = [await self._prepare(chain, context, invocation) for invocation in invocations]
        gate = context.approvals
        if gate is not None:
            if any(call.waits for call in prepared):
                await _suspend(gate, prepared)
            await gate.acted()
        results: list[ToolResult] = []
        abort: GuardRejection | None = None
        live = [call for call in prepared if call.recorded is None]
        registry = context.tools or self.registry
        pending: dict[int, asyncio.Future[_Outcome]] = {}
        try:
            if context.stored is not None and any(
                call.failure is None and not registry.idempotent(call.invocation.name)
                for call in live
            ):
                await context.stored()
            if len(live) > 1:
                pending = {id(p): asyncio.ensure_future(self._run(p)) for p in live}
            for call in prepared:
                if call.recorded is not None:
                    results.append(_replayed(chain, call, call.recorded))
                    continue
                outcome = await (pending[id(call)] if pending else self._run(call))
                result = self._record_result(chain, call, outcome)
                results.append(result)
                rejection = outcome.rejection or await self._settle(call, result)
                if rejection is not None and rejection.ends_run and abort is None:
                    abort = rejection
        except BaseException as exc:
            for future in pending.values():  # no call of the batch outlives it
                future.cancel()
            for call in prepared:
                self._abandon(call)
            if isinstance(exc, asyncio.CancelledError):
                for call in prepared[len(results) :]:
                    cancelled = ToolError("cancelled", error_code=ErrorCode.CANCELLED)
                    self._record_result(chain, call, _Outcome(error=cancelled))
            raise
        if abort is not None:
            raise abort
        return results

    async def _argument_errors(
        self, entry: RegisteredTool, arguments: Any, context: ToolCallContext
    ) -> list[FieldError]:
        return await argument_errors(
            entry.validator,
            arguments,
            off_loop=entry.patterned,
            threads=self.threads,
            tenant_id=context.tenant_id,
        )

    async def _prepare(
        self, chain: ReasoningChain, context: ToolCallContext, invocation: ToolInvocation
    ) -> _Prepared:
        allowed = context.allowed_tools
        registry = context.tools or self.registry
        available = invocation.name in registry and (allowed is None or invocation.name in allowed)
        entry = registry.entry(invocation.name) if available else None
        failure: ToolError | None = None
        raw_arguments = invocation.arguments
        arguments: dict[str, Any] = {}
        if isinstance(raw_arguments, str):
            try:
                parsed = json.loads(raw_arguments) if raw_arguments.strip() else {}
            except (ValueError, RecursionError) as exc:  # bad JSON, too deep, huge ints
                parsed = None
                failure = InvalidToolArguments(
                    invocation.name, [FieldError("", f"arguments are not valid JSON ({exc})")]
                )
        else:
            parsed = raw_arguments
        if isinstance(parsed, dict):
            arguments = parsed
        if entry is None:
            names = registry.names() if allowed is None else allowed
            known = ", ".join(sorted(names)) or "none"
            failure = ToolError(
                f"unknown tool {invocation.name!r}; available tools: {known}",
                error_code=ErrorCode.UNKNOWN_TOOL,
            )
        elif failure is None:
            problems = await self._argument_errors(entry, parsed, context)
            if problems:
                failure = InvalidToolArguments(invocation.name, problems)

        tool_type = entry.definition.type if entry else ToolType.CUSTOM
        level = invocation.visibility or (
            entry.definition.visibility.default_level if entry else VisibilityLevel.FULL
        )
        model = arguments.get("model") if tool_type is ToolType.LLM else None
        correlation_id = uuid4()
        replaying = chain.replaying
        call_step = chain.add_step(
            ReasoningStep(
                type=StepType.TOOL_CALL,
                tool_call=ToolCallInfo(
                    tool_type=tool_type,
                    tool_name=invocation.name[:255] or "?",
                    arguments=invocation.recorded_arguments
                    if invocation.recorded_arguments is not None and failure is None
                    else arguments,
                    correlation_id=correlation_id,
                    model=model if isinstance(model, str) else None,
                ),
                visibility=VisibilityConfig(level=level, summary=f"Calling {invocation.name}"),
                parent_step_id=context.parent_step_id,
            )
        )
        # A resumed run's call that is stored already: its stored id, and its stored result
        # if it has one. One started but never finished is made again only if that is safe.
        assert call_step.tool_call is not None
        correlation_id = call_step.tool_call.correlation_id
        recorded = chain.recorded_result(call_step) if replaying else None
        if recorded is not None and failure is not None and not chain.makes_calls:
            # A replay whose agent could not make this call (a tool it lacks, arguments its
            # tool refuses) gets its own failure, not the recorded result: they differ.
            recorded = None
        elif replaying and recorded is None and not chain.makes_calls:
            # A replay makes no call: one its recording has no result for is not made now.
            failure = ToolError(
                f"the recording has no result for this call of {invocation.name!r}",
                error_code=ErrorCode.REPLAY_DIVERGED,
            )
        gate = context.approvals
        waits, note = False, None
        asked = False
        if gate is not None and entry is not None and recorded is None and failure is None:
            # A call that could carry out what the run read waits, as its own rules may say.
            note = gate.flow.waits(entry.definition, arguments)
            asked = note is not None or gate.needs(
                invocation.name, tool_type, entry.definition.approval
            )
        if asked:
            assert gate is not None
            assert entry is not None
            decision = gate.decision(call_step.id) if replaying else None
            if decision is None:
                waits = True
                if replaying and not gate.waited(call_step.id):
                    unknown = (
                        "It was under way when the service stopped: whether it took effect "
                        "is unknown."
                    )
                    note = unknown if note is None else f"{unknown} {note}"
            elif not decision.status.approves:
                failure = ToolError(
                    _denial(invocation.name, decision), error_code=ErrorCode.APPROVAL_DENIED
                )
            elif decision.arguments is not None:
                problems = await self._argument_errors(entry, decision.arguments, context)
                if problems:
                    failure = InvalidToolArguments(invocation.name, problems)
                else:
                    arguments = decision.arguments
        if (
            replaying
            and recorded is None
            and failure is None
            and not waits
            and not registry.idempotent(invocation.name)
            and not (gate is not None and gate.waited(call_step.id))
        ):
            failure = ToolError(
                f"the outcome of this call of {invocation.name!r} is unknown: the service "
                "stopped while it ran, and a call with side effects is not made twice. "
                "Check whether it took effect before calling it again.",
                error_code=ErrorCode.OUTCOME_UNKNOWN,
            )
        call_context = context.at(
            correlation_id=correlation_id, parent_step_id=call_step.id, call_step=call_step
        )
        return _Prepared(
            invocation,
            entry,
            arguments,
            call_context,
            call_step,
            failure,
            recorded=recorded,
            waits=waits,
            note=note,
        )

    async def _run(self, call: _Prepared) -> _Outcome:
        if call.failure is not None or call.entry is None:
            return _Outcome(error=call.failure)
        call.pending = PendingCall(
            call.entry.tool, call.entry.definition, call.arguments, call.context, call.call_step
        )
        for guard in (*self._guards, *call.context.guards):
            try:
                await guard.before_call(call.pending)
            except GuardRejection as rejection:
                self._abandon(call)  # refused calls never ran: no after_call
                call.pending = None
                return _Outcome(rejection=rejection)
            call.passed.append(guard)
        ttl = call.entry.definition.cache_ttl_seconds
        if not ttl:
            return await self._attempt(call.entry, call.arguments, call.context)
        key = cache_key(call.context.tenant_id, call.entry.definition, call.arguments)
        cached = self._cache.get(key)
        if cached is not None:
            return _Outcome(output=ToolOutput(cached, cached=True), attempts=0)
        outcome = await self._attempt(call.entry, call.arguments, call.context)
        if outcome.output is not None:
            self._cache.put(key, outcome.output.value, ttl)
        return outcome

    @staticmethod
    def _abandon(call: _Prepared) -> None:
        """Gives the guards that let an unfinished call through their `abandon`."""
        if call.pending is None or call.settled:
            return
        call.settled = True
        for guard in call.passed:
            try:
                guard.abandon(call.pending)
            except Exception:  # one guard's failure must not keep the others from theirs
                logger.exception("guard %s failed to abandon a call", type(guard).__name__)

    async def _attempt(
        self, entry: RegisteredTool, arguments: dict[str, Any], context: ToolCallContext
    ) -> _Outcome:
        definition = entry.definition
        policy = definition.retry
        failed: list[FailedAttempt] = []
        started = time.perf_counter()
        attempt = 0
        while True:
            attempt += 1
            try:
                async with asyncio.timeout(definition.timeout_s):
                    output = await entry.tool.execute(arguments, context.at(attempt=attempt))
            except ToolError as exc:
                error = exc
            except TimeoutError:
                error = ToolTimeoutError(
                    f"{definition.name} timed out after {definition.timeout_s:g} s"
                )
            except Exception as exc:  # a tool's bug must not kill the run
                error = ToolError(f"{definition.name} raised {type(exc).__name__}: {exc}")
            else:
                failed.extend(_with_attempt(f, attempt) for f in output.failed_attempts)
                return _Outcome(
                    output=output,
                    attempts=attempt,
                    duration_ms=_elapsed_ms(started),
                    failed_attempts=failed,
                )
            retry = policy.should_retry(error.error_class, attempt)
            backoff = policy.backoff_s(attempt, error.retry_after_s) if retry else None
            failed.extend(_attempt_failures(error, attempt, backoff))
            if backoff is None:
                return _Outcome(
                    error=error,
                    attempts=attempt,
                    duration_ms=_elapsed_ms(started),
                    failed_attempts=failed,
                )
            await self._sleep(backoff)

    def _record_result(
        self, chain: ReasoningChain, call: _Prepared, outcome: _Outcome
    ) -> ToolResult:
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
            limit = (definition.max_result_chars if definition else None) or self._max_result_chars
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
            info = ToolResultInfo(
                success=False,
                error=message,
                error_code=code,
                model=call_info.model,
                **common,
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

    async def _settle(self, call: _Prepared, result: ToolResult) -> GuardRejection | None:
        """Hands usage to the recorder, then lets guards see the result."""
        info = result.info
        # A sub-agent's usage is in its own task's cost records already.
        if self._recorder is not None and _has_usage(info) and not result.billed_elsewhere:
            assert info.tool_name is not None, "the executor names every result's tool"
            assert info.tool_type is not None
            await self._recorder.record_cost(
                CostRecord(
                    task_id=call.context.task_id,
                    chain_id=call.context.chain_id,
                    step_id=result.result_step.id,
                    correlation_id=info.correlation_id,
                    tool_name=info.tool_name,
                    tool_type=info.tool_type,
                    tenant_id=call.context.tenant_id,
                    user_id=call.context.user_id,
                    model=info.model,
                    deployment=info.deployment,
                    provider=info.provider,
                    input_tokens=info.input_tokens or 0,
                    output_tokens=info.output_tokens or 0,
                    cost_usd=info.cost_usd,
                    unpriced=info.unpriced,
                )
            )
        if call.pending is None or call.settled:
            return None
        call.settled = True
        for guard in call.passed:
            try:
                await guard.after_call(call.pending, info)
            except GuardRejection as rejection:
                return rejection
        return None


def _redact_outcome(outcome: _Outcome, services: ToolServices) -> None:
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


def _attempt_failures(error: ToolError, attempt: int, backoff: float | None) -> list[FailedAttempt]:
    inner = [_with_attempt(f, attempt) for f in error.failed_attempts]
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


def _with_attempt(failure: FailedAttempt, attempt: int) -> FailedAttempt:
    return failure.model_copy(update={"attempt": attempt})


def _failure(tool_type: ToolType | None, outcome: _Outcome) -> tuple[ErrorCode, str]:
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


def _has_usage(info: ToolResultInfo) -> bool:
    return info.unpriced or info.cost_usd is not None or info.total_tokens is not None


def _replayed(chain: ReasoningChain, call: _Prepared, recorded: ReasoningStep) -> ToolResult:
    """A replayed call's result, as the stored step says: its value (an LLM reply is stored
    whole), no images (they are not stored), nothing billed or guarded again."""
    result_step = chain.add_step(recorded)
    info = result_step.tool_result
    assert info is not None
    _flowed(call, info)
    value = info.result if info.success else None
    return ToolResult(call.call_step, result_step, value)


def _flowed(call: _Prepared, info: ToolResultInfo) -> None:
    """What a result (made or replayed) brought into its run's context, and where its call
    went if it was made, for the run's data flow."""
    gate = call.context.approvals
    if gate is None or call.entry is None:
        return
    if info.attempts:
        gate.flow.called(call.entry.definition, call.arguments)
    if info.labels:
        gate.flow.took_in(call.entry.definition.name, info.labels)


async def _suspend(gate: ApprovalGate, prepared: list[_Prepared]) -> NoReturn:
    """Stops the run where a batch has calls to wait for a human: they are stored as
    pending (with the batch's other calls, held: none of the batch runs before all are
    decided), then `ApprovalPending` ends the run at this step boundary."""
    pending = []
    for call in prepared:
        if not call.waits:
            continue
        assert call.entry is not None
        assert call.call_step.tool_call is not None
        info = call.call_step.tool_call
        pending.append(
            PendingApproval(
                approval_id=uuid4(),
                call_step=call.call_step,
                tool_name=info.tool_name,
                tool_type=info.tool_type,
                arguments=info.arguments,
                input_schema=call.entry.definition.parameters,
                expires_at=gate.expiry(),
                note=call.note,
            )
        )
    held = [call.call_step.id for call in prepared if not call.waits and call.recorded is None]
    if gate.ask is not None:
        await gate.ask(pending, held)
    raise ApprovalPending(pending, held)


def _denial(name: str, decision: Decision) -> str:
    if decision.status is ApprovalStatus.EXPIRED:
        said = f"nobody approved this call of {name!r} in time"
    else:
        by = f" ({decision.decided_by})" if decision.decided_by else ""
        said = f"a reviewer{by} denied this call of {name!r}"
    reason = f": {decision.reason.rstrip('.')}" if decision.reason else ""
    return f"{said}{reason}. It was not made."


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
