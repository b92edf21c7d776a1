"""How the executor prepares a call before anything of it runs: its tool and arguments
checked, its `tool_call` step recorded, and on a resumed or replayed run what is stored of it
applied, the decision of a human who was asked about it included.

Each step records what stops the call as the call's `failure` instead of raising: a call that
cannot be made becomes a failed result the model reads.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from app.chain import (
    ErrorCode,
    ReasoningChain,
    ReasoningStep,
    StepType,
    ToolCallInfo,
    ToolType,
    VisibilityConfig,
    VisibilityLevel,
)
from app.ids import uuid4
from app.tools.approvals import ApprovalGate, ApprovalStatus, Decision
from app.tools.errors import FieldError, InvalidToolArguments, ToolError
from app.tools.guards import PendingCall, ToolGuard
from app.tools.models import ToolCallContext
from app.tools.registry import RegisteredTool, ToolRegistry
from app.tools.results import ToolInvocation


@dataclass(slots=True)
class PreparedCall:
    """One call of a batch, its `tool_call` step recorded, on its way through the executor."""

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


def tool_entry(
    registry: ToolRegistry, name: str, allowed: frozenset[str] | None
) -> RegisteredTool | None:
    """The tool a call names, if the run may use it."""
    return registry.entry(name) if registry.offered(name, allowed) else None


def unknown_tool(name: str, registry: ToolRegistry, allowed: frozenset[str] | None) -> ToolError:
    names = (
        [n for n in registry.names() if registry.offered(n, None)] if allowed is None else allowed
    )
    known = ", ".join(sorted(names)) or "none"
    return ToolError(
        f"unknown tool {name!r}; available tools: {known}", error_code=ErrorCode.UNKNOWN_TOOL
    )


def parsed_arguments(invocation: ToolInvocation) -> Any:
    """The call's arguments, decoded when they came as JSON text; when that text is not
    JSON, the `InvalidToolArguments` that says so (returned, not raised)."""
    raw = invocation.arguments
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError) as exc:  # bad JSON, too deep, huge ints
        return InvalidToolArguments(
            invocation.name, [FieldError("", f"arguments are not valid JSON ({exc})")]
        )


def recorded_call(
    chain: ReasoningChain,
    context: ToolCallContext,
    invocation: ToolInvocation,
    entry: RegisteredTool | None,
    arguments: dict[str, Any],
    failure: ToolError | None,
) -> PreparedCall:
    """The call, recorded as its `tool_call` step. A resumed run's call that is stored
    already keeps its stored step id and correlation id."""
    tool_type = entry.definition.type if entry else ToolType.CUSTOM
    level = invocation.visibility or (
        entry.definition.visibility.default_level if entry else VisibilityLevel.FULL
    )
    model = arguments.get("model") if tool_type is ToolType.LLM else None
    recorded_arguments = invocation.recorded_arguments
    call_step = chain.add_step(
        ReasoningStep(
            type=StepType.TOOL_CALL,
            tool_call=ToolCallInfo(
                tool_type=tool_type,
                tool_name=invocation.name[:255] or "?",
                arguments=recorded_arguments
                if recorded_arguments is not None and failure is None
                else arguments,
                correlation_id=uuid4(),
                model=model if isinstance(model, str) else None,
            ),
            visibility=VisibilityConfig(level=level, summary=f"Calling {invocation.name}"),
            parent_step_id=context.parent_step_id,
        )
    )
    assert call_step.tool_call is not None
    call_context = context.at(
        correlation_id=call_step.tool_call.correlation_id,
        parent_step_id=call_step.id,
        call_step=call_step,
    )
    return PreparedCall(invocation, entry, arguments, call_context, call_step, failure)


def take_recorded_result(chain: ReasoningChain, call: PreparedCall) -> None:
    """On a replayed run: the stored result of the call, if it has one. A call started but
    never finished is made again only if that is safe (`refuse_unknown_outcome`)."""
    recorded = chain.recorded_result(call.call_step)
    if recorded is not None and call.failure is not None and not chain.makes_calls:
        # A replay whose agent could not make this call (a tool it lacks, arguments its
        # tool refuses) gets its own failure, not the recorded result: they differ.
        recorded = None
    elif recorded is None and not chain.makes_calls:
        # A replay makes no call: one its recording has no result for is not made now.
        call.failure = ToolError(
            f"the recording has no result for this call of {call.invocation.name!r}",
            error_code=ErrorCode.REPLAY_DIVERGED,
        )
    call.recorded = recorded


def consult_approvals(
    gate: ApprovalGate, call: PreparedCall, replaying: bool
) -> dict[str, Any] | None:
    """Whether the call waits for a human, and what a decision already taken (on a resumed
    run) does to it: a denial fails it. Returns the arguments a reviewer edited, which the
    call is made with once they are checked; None when there are none."""
    entry = call.entry
    assert entry is not None, "a call without its tool has failed already"
    definition = entry.definition
    # A call that could carry out what the run read waits, as its own rules may say.
    note = gate.flow.waits(definition, call.arguments)
    if note is None and not gate.needs(call.invocation.name, definition.type, definition.approval):
        return None
    step_id = call.call_step.id
    decision = gate.decision(step_id) if replaying else None
    if decision is None:
        call.waits = True
        if replaying and not gate.waited(step_id):
            unknown = (
                "It was under way when the service stopped: whether it took effect is unknown."
            )
            note = unknown if note is None else f"{unknown} {note}"
    elif not decision.status.approves:
        call.failure = ToolError(
            denial(call.invocation.name, decision), error_code=ErrorCode.APPROVAL_DENIED
        )
    call.note = note
    return None if decision is None or call.failure is not None else decision.arguments


def refuse_unknown_outcome(
    call: PreparedCall, registry: ToolRegistry, gate: ApprovalGate | None
) -> None:
    """On a resumed run: a call with side effects that was under way when the service
    stopped fails rather than being made twice."""
    if (
        call.recorded is None
        and call.failure is None
        and not call.waits
        and not registry.idempotent(call.invocation.name)
        and not (gate is not None and gate.waited(call.call_step.id))
    ):
        call.failure = ToolError(
            f"the outcome of this call of {call.invocation.name!r} is unknown: the service "
            "stopped while it ran, and a call with side effects is not made twice. "
            "Check whether it took effect before calling it again.",
            error_code=ErrorCode.OUTCOME_UNKNOWN,
        )


def denial(name: str, decision: Decision) -> str:
    if decision.status is ApprovalStatus.EXPIRED:
        said = f"nobody approved this call of {name!r} in time"
    else:
        by = f" ({decision.decided_by})" if decision.decided_by else ""
        said = f"a reviewer{by} denied this call of {name!r}"
    reason = f": {decision.reason.rstrip('.')}" if decision.reason else ""
    return f"{said}{reason}. It was not made."
