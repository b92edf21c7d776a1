"""The audit event of every tool call of a run: who called which tool with what (redacted),
how it ended and what it cost. Written with the run's steps, in the same transaction."""

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.chain import (
    ReasoningChain,
    ReasoningStep,
    StepType,
    ToolType,
    VisibilityLevel,
    format_usd,
)
from app.governance.audit import AuditAction, audit_row
from app.security.visibility import ReaderView, StepFacts


class ToolAuditor:
    """Audits one run's tool calls, each from its result step and the call step it names (in
    `chain`). `redactor` is a view without full access, so arguments and results are recorded
    with every sensitive field replaced; `audit_levels` says, per tool, whether the result is
    kept too (`full`)."""

    def __init__(
        self,
        *,
        chain: ReasoningChain,
        actor: str,
        redactor: ReaderView,
        audit_levels: Mapping[str, str],
    ) -> None:
        self.chain = chain
        self._task_id = chain.task_id
        self._chain_id = str(chain.id)
        self._actor = actor
        self._redactor = redactor
        self._audit_levels = audit_levels

    def observe(
        self, step: ReasoningStep, step_json: str, facts: StepFacts, at: datetime
    ) -> dict[str, Any] | None:
        """The audit row a step completes (a tool_result), or None."""
        result = step.tool_result
        if result is None:
            return None
        call = self.chain.step_by_correlation_id(result.correlation_id)
        details: dict[str, Any] = {
            "task_id": self._task_id,
            "chain_id": self._chain_id,
            "call_step": None if call is None else call.step_number,
            "result_step": step.step_number,
            "correlation_id": str(result.correlation_id),
            "tool_type": facts.tool_type,
            "arguments": None if call is None else self._arguments(call, facts),
            "outcome": "success" if result.success else (result.error_code or "error"),
            "duration_ms": result.duration_ms,
            "attempts": result.attempts,
            "model": result.model,
            "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens,
            "cost_usd": None if result.cost_usd is None else format_usd(result.cost_usd),
            "unpriced": result.unpriced,
        }
        if not result.success:
            details["error"] = result.error
        elif facts.tool_name is not None and self._audit_levels.get(facts.tool_name) == "full":
            redacted = self._redacted(step_json, facts, "tool_result", "result")
            details["result"] = result.result if redacted is None else redacted
        return audit_row(
            actor=self._actor,
            action=AuditAction.TOOL_EXECUTE,
            resource_type="tool",
            resource_id=facts.tool_name,
            details={key: value for key, value in details.items() if value is not None},
            at=at,
        )

    def _arguments(self, call: ReasoningStep, facts: StepFacts) -> Any:
        """The call's arguments, redacted; an LLM call's messages are counted, not kept (the
        conversation is in the chain; the audit log keeps what was asked of whom)."""
        assert call.tool_call is not None
        arguments = dict(call.tool_call.arguments)
        if call.tool_call.tool_type is ToolType.LLM:
            messages = arguments.get("messages")
            arguments["messages"] = len(messages) if isinstance(messages, list) else 0
        full = StepFacts(StepType.TOOL_CALL, facts.tool_type, facts.tool_name, VisibilityLevel.FULL)
        # Redacted under its key, as in the step: a tenant may have named `arguments` itself
        # sensitive (then it is the marker).
        redacted = self._redactor.arguments({"arguments": arguments}, full)
        assert redacted is not None, "a full-level step is never hidden"
        return redacted["arguments"]

    def _redacted(self, step_json: str, facts: StepFacts, payload: str, key: str) -> Any:
        """`step[payload][key]` redacted, or None when the step needs no redaction (the
        common case: then it is not decoded at all)."""
        full = StepFacts(facts.type, facts.tool_type, facts.tool_name, VisibilityLevel.FULL)
        rendered = self._redactor.render(step_json, full)
        assert rendered is not None, "a full-level step is never hidden"
        if rendered is step_json:
            return None
        return json.loads(rendered)[payload][key]
