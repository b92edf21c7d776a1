"""The audit event of every tool call of a run: who called which tool with what (redacted),
how it ended and what it cost. Written with the run's steps, in the same transaction."""

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from app.chain import ReasoningStep, ToolType, VisibilityLevel
from app.governance.audit import AuditAction, audit_row
from app.security.visibility import ReaderView, StepFacts


class ToolAuditor:
    """Audits one run's tool calls. `redactor` is a view without full access, so arguments
    and results are recorded with every sensitive field replaced; `audit_levels` says, per
    tool, whether the result is kept too (`full`)."""

    def __init__(
        self,
        *,
        task_id: UUID,
        chain_id: UUID,
        actor: str,
        redactor: ReaderView,
        audit_levels: Mapping[str, str],
    ) -> None:
        self._task_id = str(task_id)
        self._chain_id = str(chain_id)
        self._actor = actor
        self._redactor = redactor
        self._audit_levels = audit_levels
        self._calls: dict[UUID, tuple[int, Any]] = {}

    def observe(
        self, step: ReasoningStep, step_json: str, facts: StepFacts, at: datetime
    ) -> dict[str, Any] | None:
        """The audit row a step completes (a tool_result), or None."""
        if step.tool_call is not None:
            arguments = self._redacted(step_json, facts, "tool_call", "arguments")
            if arguments is None:  # nothing to redact
                arguments = dict(step.tool_call.arguments)
            # (A tenant may have named `arguments` itself sensitive: then it is the marker.)
            if step.tool_call.tool_type is ToolType.LLM and isinstance(arguments, dict):
                # The conversation is in the chain; the audit log keeps what was asked of whom.
                messages = arguments.pop("messages", [])
                arguments["messages"] = len(messages) if isinstance(messages, list) else 0
            self._calls[step.tool_call.correlation_id] = (step.step_number, arguments)
            return None
        result = step.tool_result
        if result is None:
            return None
        call_step, arguments = self._calls.pop(result.correlation_id, (None, None))
        details: dict[str, Any] = {
            "task_id": self._task_id,
            "chain_id": self._chain_id,
            "call_step": call_step,
            "result_step": step.step_number,
            "correlation_id": str(result.correlation_id),
            "tool_type": facts.tool_type,
            "arguments": arguments,
            "outcome": "success" if result.success else (result.error_code or "error"),
            "duration_ms": result.duration_ms,
            "attempts": result.attempts,
            "model": result.model,
            "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens,
            "cost_usd": None if result.cost_usd is None else str(result.cost_usd),
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

    def _redacted(self, step_json: str, facts: StepFacts, payload: str, key: str) -> Any:
        """`step[payload][key]` redacted, or None when the step needs no redaction (the
        common case: then it is not decoded at all)."""
        full = StepFacts(facts.type, facts.tool_type, facts.tool_name, VisibilityLevel.FULL)
        rendered = self._redactor.render(step_json, full)
        assert rendered is not None, "a full-level step is never hidden"
        if rendered is step_json:
            return None
        return json.loads(rendered)[payload][key]
