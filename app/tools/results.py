"""What a tool call returns to its caller, and how its value is stored in the chain."""

import json
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_jsonable_python

from app.chain import ErrorCode, ReasoningStep, ToolResultInfo, VisibilityLevel
from app.tools.models import ModelImage


@dataclass(frozen=True, slots=True)
class ToolInvocation:
    """A call as the agent (or the model) asked for it; arguments may still be raw JSON."""

    name: str
    arguments: dict[str, Any] | str
    visibility: VisibilityLevel | None = None
    # What the tool_call step records instead of `arguments` (same meaning, more compact),
    # e.g. an LLM call's conversation as a reference to the previous call plus new messages.
    recorded_arguments: dict[str, Any] | None = None


@dataclass(slots=True)
class ToolResult:
    """The outcome of one call: its two recorded steps, the full, untruncated value and the
    images the tool handed on for a model that takes them (not recorded)."""

    call_step: ReasoningStep
    result_step: ReasoningStep
    value: Any = None
    images: tuple[ModelImage, ...] = ()
    # Its usage is a sub-agent's, in that task's own cost records already.
    billed_elsewhere: bool = False

    @property
    def info(self) -> ToolResultInfo:
        assert self.result_step.tool_result is not None
        return self.result_step.tool_result

    @property
    def success(self) -> bool:
        return self.info.success

    @property
    def error(self) -> str | None:
        return self.info.error

    @property
    def error_code(self) -> ErrorCode | None:
        return self.info.error_code


def render_result(value: Any, limit: int) -> tuple[Any, bool, int | None]:
    """The value as stored in the step: JSON-compatible, and cut to `limit` characters with an
    explicit marker when longer. Returns (value, truncated, original length)."""
    if isinstance(value, str):
        text = value
    else:
        value = to_jsonable_python(value, fallback=str)
        if value is None or isinstance(value, bool | int | float):
            return value, False, None
        text = json.dumps(value, ensure_ascii=False)
        if len(text) <= limit:
            return value, False, None
    if len(text) <= limit:
        return text, False, None
    marker = f"\n…[truncated: {limit} of {len(text)} characters shown]"
    return text[:limit] + marker, True, len(text)
