"""The one path every tool call takes: validate, guard, run with timeout and retries, record."""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from typing import Any, NoReturn

from app.bulkheads import TenantThreads
from app.chain import ErrorCode, FailedAttempt, ReasoningChain, VisibilityLevel
from app.ids import uuid4
from app.tools.approvals import ApprovalGate, ApprovalPending, PendingApproval
from app.tools.cache import ToolResultCache, cache_key
from app.tools.errors import GuardRejection, InvalidToolArguments, ToolError, ToolTimeoutError
from app.tools.guards import PendingCall, ToolGuard
from app.tools.models import ToolCallContext, ToolOutput
from app.tools.outcomes import (
    Outcome,
    attempt_failures,
    has_usage,
    record_result,
    replayed,
    with_attempt,
)
from app.tools.preparation import (
    PreparedCall,
    consult_approvals,
    parsed_arguments,
    recorded_call,
    refuse_unknown_outcome,
    take_recorded_result,
    tool_entry,
    unknown_tool,
)
from app.tools.recording import CostRecord, CostRecorder
from app.tools.registry import RegisteredTool, ToolRegistry
from app.tools.results import ToolInvocation, ToolResult
from app.tools.validation import argument_errors

logger = logging.getLogger(__name__)

DEFAULT_MAX_RESULT_CHARS = 16_000


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
        pending: dict[int, asyncio.Future[Outcome]] = {}
        try:
            if context.stored is not None and any(
                call.failure is None and not registry.idempotent(call.invocation.name)
                for call in live
            ):
                await context.stored()
            begun: list[bool] = [False]  # whether a call of the batch has started
            if len(live) > 1:
                pending = {id(p): asyncio.ensure_future(self._run(p, begun)) for p in live}
            for call in prepared:
                if call.recorded is not None:
                    results.append(replayed(chain, call, call.recorded))
                    continue
                outcome = await (pending[id(call)] if pending else self._run(call, begun))
                result = record_result(chain, call, outcome, self._max_result_chars)
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
                    record_result(chain, call, Outcome(error=cancelled), self._max_result_chars)
            raise
        if abort is not None:
            raise abort
        return results

    async def _prepare(
        self, chain: ReasoningChain, context: ToolCallContext, invocation: ToolInvocation
    ) -> PreparedCall:
        """The call checked and recorded as its `tool_call` step, with what a replayed run
        has stored of it applied; what keeps it from being made is its `failure`."""
        registry = context.tools or self.registry
        allowed = context.allowed_tools
        entry = tool_entry(registry, invocation.name, allowed)
        parsed = parsed_arguments(invocation)
        failure: ToolError | None
        if entry is None:
            failure = unknown_tool(invocation.name, registry, allowed)
        else:
            failure = await self._refusal(entry, invocation.name, parsed, context)
        arguments = parsed if isinstance(parsed, dict) else {}
        replaying = chain.replaying  # read before the call step, which may end the replay
        call = recorded_call(chain, context, invocation, entry, arguments, failure)
        if replaying:
            take_recorded_result(chain, call)
        gate = context.approvals
        if gate is not None and call.recorded is None and call.failure is None:
            edited = consult_approvals(gate, call, replaying)
            if edited is not None:
                await self._take_edited_arguments(call, edited)
        if replaying:
            refuse_unknown_outcome(call, registry, gate)
        return call

    async def _refusal(
        self, entry: RegisteredTool, name: str, arguments: Any, context: ToolCallContext
    ) -> ToolError | None:
        """Why the tool refuses these arguments (not JSON, or not valid by its schema);
        None when it takes them."""
        if isinstance(arguments, InvalidToolArguments):
            return arguments
        problems = await argument_errors(
            entry.validator,
            arguments,
            off_loop=entry.patterned,
            threads=self.threads,
            tenant_id=context.tenant_id,
        )
        return InvalidToolArguments(name, problems) if problems else None

    async def _take_edited_arguments(self, call: PreparedCall, edited: dict[str, Any]) -> None:
        """A reviewer's edit of the arguments: the call is made with them if its tool takes
        them, else it fails."""
        assert call.entry is not None
        call.failure = await self._refusal(call.entry, call.invocation.name, edited, call.context)
        if call.failure is None:
            call.arguments = edited

    async def _run(self, call: PreparedCall, begun: list[bool]) -> Outcome:
        """The call through its guards, then made. Until a call of its batch has started
        (`begun`), the run's `starting` may stop the batch there (the run was released)."""
        if call.failure is not None or call.entry is None:
            return Outcome(error=call.failure)
        call.pending = PendingCall(
            call.entry.tool, call.entry.definition, call.arguments, call.context, call.call_step
        )
        for guard in (*self._guards, *call.context.guards):
            try:
                await guard.before_call(call.pending)
            except GuardRejection as rejection:
                self._abandon(call)  # refused calls never ran: no after_call
                call.pending = None
                return Outcome(rejection=rejection)
            call.passed.append(guard)
        if not begun[0]:
            if call.context.starting is not None:
                await call.context.starting()
            begun[0] = True
        ttl = call.entry.definition.cache_ttl_seconds
        if not ttl:
            return await self._attempt(call.entry, call.arguments, call.context)
        key = cache_key(call.context.tenant_id, call.entry.definition, call.arguments)
        cached = self._cache.get(key)
        if cached is not None:
            return Outcome(output=ToolOutput(cached, cached=True), attempts=0)
        outcome = await self._attempt(call.entry, call.arguments, call.context)
        if outcome.output is not None:
            self._cache.put(key, outcome.output.value, ttl)
        return outcome

    @staticmethod
    def _abandon(call: PreparedCall) -> None:
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
    ) -> Outcome:
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
                failed.extend(with_attempt(f, attempt) for f in output.failed_attempts)
                return Outcome(
                    output=output,
                    attempts=attempt,
                    duration_ms=_elapsed_ms(started),
                    failed_attempts=failed,
                )
            retry = policy.should_retry(error.error_class, attempt)
            backoff = policy.backoff_s(attempt, error.retry_after_s) if retry else None
            failed.extend(attempt_failures(error, attempt, backoff))
            if backoff is None:
                return Outcome(
                    error=error,
                    attempts=attempt,
                    duration_ms=_elapsed_ms(started),
                    failed_attempts=failed,
                )
            await self._sleep(backoff)

    async def _settle(self, call: PreparedCall, result: ToolResult) -> GuardRejection | None:
        """Hands usage to the recorder, then lets guards see the result."""
        info = result.info
        # A sub-agent's usage is in its own task's cost records already.
        if self._recorder is not None and has_usage(info) and not result.billed_elsewhere:
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
                    strategy=call.context.strategy,
                    sandbox_s=None if info.sandbox_s is None else Decimal(str(info.sandbox_s)),
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


async def _suspend(gate: ApprovalGate, prepared: list[PreparedCall]) -> NoReturn:
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


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
