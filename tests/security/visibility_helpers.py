"""Stored steps and reader views for the visibility tests (test_visibility_*.py): each helper
builds a step as the recorder stores it, with the facts a view decides its level from."""

import json
from collections.abc import Iterable
from typing import Any
from uuid import uuid4

from app.chain import (
    ReasoningStep,
    StepType,
    SynthesisInfo,
    ThinkingInfo,
    ToolCallInfo,
    ToolResultInfo,
    ToolType,
    VisibilityConfig,
    VisibilityLevel,
)
from app.security.visibility import ReaderView, StepFacts, VisibilityPolicy

FULL, SUMMARY, HIDDEN = VisibilityLevel.FULL, VisibilityLevel.SUMMARY, VisibilityLevel.HIDDEN
SECRET = "hunter2-xyz"

Stored = tuple[str, StepFacts]


def view(
    policy: VisibilityPolicy | None = None,
    *,
    roles: Iterable[str] = ("member",),
    full_access: bool = False,
    sensitive_fields: Iterable[str] = ("password",),
) -> ReaderView:
    return ReaderView(
        policy or VisibilityPolicy(),
        roles=frozenset(roles),
        full_access=full_access,
        sensitive_fields=sensitive_fields,
    )


def call(
    arguments: dict[str, Any],
    *,
    tool: str = "crm_lookup",
    tool_type: ToolType = ToolType.EXTERNAL,
    level: VisibilityLevel = FULL,
    summary: str | None = None,
) -> Stored:
    step = ReasoningStep(
        type=StepType.TOOL_CALL,
        step_number=1,
        tool_call=ToolCallInfo(tool_type=tool_type, tool_name=tool, arguments=arguments),
        visibility=VisibilityConfig(level=level, summary=summary),
    )
    return step.model_dump_json(), StepFacts(StepType.TOOL_CALL, tool_type, tool, level)


def result(
    value: Any,
    *,
    tool: str = "crm_lookup",
    tool_type: ToolType = ToolType.EXTERNAL,
    level: VisibilityLevel = FULL,
) -> Stored:
    step = ReasoningStep(
        type=StepType.TOOL_RESULT,
        step_number=2,
        parent_step_id=uuid4(),
        tool_result=ToolResultInfo(
            correlation_id=uuid4(), success=True, result=value, duration_ms=3.5, input_tokens=7
        ),
        visibility=VisibilityConfig(level=level),
    )
    return step.model_dump_json(), StepFacts(StepType.TOOL_RESULT, tool_type, tool, level)


def synthesis(conclusion: str, level: VisibilityLevel = FULL) -> Stored:
    step = ReasoningStep(
        type=StepType.SYNTHESIS,
        step_number=3,
        synthesis=SynthesisInfo(conclusion=conclusion),
        visibility=VisibilityConfig(level=level),
    )
    return step.model_dump_json(), StepFacts(StepType.SYNTHESIS, None, None, level)


def thinking(thought: str, level: VisibilityLevel = FULL) -> Stored:
    step = ReasoningStep(
        type=StepType.THINKING,
        thinking=ThinkingInfo(thought=thought),
        visibility=VisibilityConfig(level=level),
    )
    return step.model_dump_json(), StepFacts(StepType.THINKING, None, None, level)


def shown(reader: ReaderView, stored: Stored) -> dict[str, Any]:
    rendered = reader.render(*stored)
    assert rendered is not None
    document: dict[str, Any] = json.loads(rendered)
    return document


def facts(
    tool_type: ToolType | None = ToolType.DATABASE,
    tool: str | None = "sql_query",
    level: VisibilityLevel = FULL,
) -> StepFacts:
    return StepFacts(StepType.TOOL_CALL, tool_type, tool, level)
