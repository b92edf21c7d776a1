"""The audit event of each tool call: redacted arguments, outcome and cost, built from each
result step as it is recorded and the call step it names in the chain."""

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import uuid4

from app.chain import (
    ReasoningChain,
    ReasoningStep,
    StepType,
    ToolCallInfo,
    ToolResultInfo,
    ToolType,
    VisibilityLevel,
)
from app.runs.audit import ToolAuditor
from app.security.visibility import ReaderView, StepFacts, VisibilityPolicy

AT = datetime(2026, 11, 22, tzinfo=UTC)


def _auditor(*sensitive: str, levels: dict[str, str] | None = None) -> ToolAuditor:
    view = ReaderView(
        VisibilityPolicy(), roles=frozenset(), full_access=False, sensitive_fields=sensitive
    )
    chain = ReasoningChain(task_id=str(uuid4()), agent_id="test", tenant_id="t")
    return ToolAuditor(chain=chain, actor="alice", redactor=view, audit_levels=levels or {})


def _call_and_result(
    auditor: ToolAuditor, tool_type: ToolType, name: str, arguments: dict[str, Any], **result: Any
) -> dict[str, Any] | None:
    chain = auditor.chain
    call = chain.add_step(
        ReasoningStep(
            type=StepType.TOOL_CALL,
            tool_call=ToolCallInfo(tool_type=tool_type, tool_name=name, arguments=arguments),
        )
    )
    assert call.tool_call is not None
    facts = StepFacts(StepType.TOOL_CALL, tool_type, name, VisibilityLevel.FULL)
    assert auditor.observe(call, call.model_dump_json(), facts, AT) is None
    done = chain.add_step(
        ReasoningStep(
            type=StepType.TOOL_RESULT,
            tool_result=ToolResultInfo(
                correlation_id=call.tool_call.correlation_id,
                tool_type=tool_type,
                tool_name=name,
                duration_ms=3.5,
                **result,
            ),
        )
    )
    facts = StepFacts(StepType.TOOL_RESULT, tool_type, name, VisibilityLevel.FULL)
    return auditor.observe(done, done.model_dump_json(), facts, AT)


def test_a_tool_call_is_audited_with_redacted_arguments_outcome_and_cost() -> None:
    row = _call_and_result(
        _auditor("password", levels={"vault": "full"}),
        ToolType.DATABASE,
        "vault",
        {"user": "db", "nested": {"Password": "hunter2-xyz"}},
        success=True,
        result={"ok": True, "echo": "hunter2-xyz"},
        cost_usd=Decimal("0.0012"),
    )
    assert row is not None
    assert row["actor"] == "alice"
    assert row["action"] == "tool.execute"
    assert row["resource_type"] == "tool"
    assert row["resource_id"] == "vault"
    details = row["details"]
    assert details["arguments"] == {"user": "db", "nested": {"Password": "[REDACTED]"}}
    assert details["result"] == {"ok": True, "echo": "[REDACTED]"}  # masked by value
    assert details["outcome"] == "success"
    assert details["cost_usd"] == "0.0012"
    assert (details["call_step"], details["result_step"]) == (1, 2)


def test_an_llm_call_is_audited_without_its_conversation() -> None:
    messages = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    row = _call_and_result(
        _auditor(),
        ToolType.LLM,
        "llm",
        {"model": "m", "messages": messages},
        success=False,
        error="boom",
        error_code="llm_error",
    )
    assert row is not None
    assert row["details"]["arguments"] == {"model": "m", "messages": 2}
    assert row["details"]["outcome"] == "llm_error"
    assert row["details"]["error"] == "boom"
    assert "result" not in row["details"]


def test_a_tenant_marking_arguments_itself_sensitive_gets_the_marker() -> None:
    row = _call_and_result(
        _auditor("arguments"), ToolType.LLM, "llm", {"messages": []}, success=True
    )
    assert row is not None
    assert row["details"]["arguments"] == "[REDACTED]"
