"""Replaying a recorded chain: what a step of the new run is compared with, and the report of
whether the run reproduced the recording step for step or where it first went another way."""

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from app.chain.enums import ToolType

if TYPE_CHECKING:
    from app.chain.models import ReasoningStep

_SHOWN_CHARS = 500
"""How much of each differing value a report shows."""


class ReplayMatch(StrEnum):
    """What a replayed step must repeat of its recorded one."""

    # Everything the agent did, the requests it sent to models included: a changed prompt,
    # instruction or history shows at the first LLM call it changes.
    REQUESTS = "requests"
    # The agent's own actions (tool calls and their arguments, thoughts, answers); the models'
    # requests may differ, and get the recorded replies anyway: a check of parsers and of what
    # an agent does with the same replies.
    ACTIONS = "actions"


class StepDifference(BaseModel):
    """The first step where a replay did not repeat its recording."""

    model_config = ConfigDict(extra="forbid")

    step_number: int = Field(description="The step of the recording (and of the replay).")
    recorded: str | None = Field(
        description="What the recording has at this step; null: the recording ended before."
    )
    replayed: str | None = Field(
        description="What the replay made at this step; null: the replay ended before."
    )
    field: str | None = Field(
        default=None,
        description="Where the two steps differ, as a path into the step (e.g. "
        "`tool_call.arguments.messages.0.content`).",
    )
    recorded_value: str | None = Field(
        default=None, description=f"The recorded value there (first {_SHOWN_CHARS} characters)."
    )
    replayed_value: str | None = Field(
        default=None, description=f"The replayed value there (first {_SHOWN_CHARS} characters)."
    )

    def describe(self) -> str:
        if self.replayed is None:
            return (
                f"the replay ended before step {self.step_number}, where the recording has "
                f"{self.recorded}"
            )
        if self.recorded is None:
            return (
                f"the replay went on past the recording's end: its step {self.step_number} "
                f"is {self.replayed}"
            )
        where = f" ({self.field} differs)" if self.field else ""
        return (
            f"step {self.step_number} was {self.recorded} in the recording; the replay made "
            f"{self.replayed}{where}"
        )


class ReplayReport(BaseModel):
    """Whether a replay reproduced its recording step for step."""

    model_config = ConfigDict(extra="forbid")

    reproduced: bool
    match: ReplayMatch
    recorded_steps: int = Field(description="Steps of the recording.")
    matched_steps: int = Field(description="Steps the replay repeated before it diverged.")
    divergence: StepDifference | None = None


def describe(step: "ReasoningStep") -> str:
    if step.tool_call is not None:
        return f"a call of {step.tool_call.tool_name!r}"
    if step.tool_result is not None:
        return "a tool result"
    return f"a {step.type} step"


def step_difference(
    step: "ReasoningStep", recorded: "ReasoningStep", match: ReplayMatch
) -> StepDifference | None:
    """How `step` differs from the `recorded` one (None: it repeats it). An LLM call's
    arguments count only when `match` is `requests`."""
    found = _compare(step, recorded, match)
    if found is None:
        return None
    path, mine, theirs = found
    return StepDifference(
        step_number=recorded.step_number,
        recorded=describe(recorded),
        replayed=describe(step),
        field=path,
        recorded_value=_shown(theirs),
        replayed_value=_shown(mine),
    )


def ended(
    step_number: int, recorded: "ReasoningStep | None", step: "ReasoningStep | None"
) -> StepDifference:
    """One side ended at `step_number` while the other went on."""
    return StepDifference(
        step_number=step_number,
        recorded=None if recorded is None else describe(recorded),
        replayed=None if step is None else describe(step),
    )


_Found = tuple[str, Any, Any]


def _compare(step: "ReasoningStep", recorded: "ReasoningStep", match: ReplayMatch) -> _Found | None:
    if step.type != recorded.type:
        return "type", step.type, recorded.type
    call, stored = step.tool_call, recorded.tool_call
    if call is not None and stored is not None:
        if call.tool_name != stored.tool_name:
            return "tool_call.tool_name", call.tool_name, stored.tool_name
        if call.tool_type is ToolType.LLM and match is not ReplayMatch.REQUESTS:
            return None
        return _first(call.arguments, stored.arguments, "tool_call.arguments")
    result, stored_result = step.tool_result, recorded.tool_result
    if result is not None and stored_result is not None:
        if result.correlation_id != stored_result.correlation_id:
            return "tool_result.correlation_id", result.correlation_id, stored_result.correlation_id
        if result.success != stored_result.success:
            return "tool_result.success", result.success, stored_result.success
        return _first(result.error, stored_result.error, "tool_result.error")
    if step.thinking is not None and recorded.thinking is not None:
        return _first(step.thinking.thought, recorded.thinking.thought, "thinking.thought")
    if step.synthesis is not None and recorded.synthesis is not None:
        return _first(
            step.synthesis.conclusion, recorded.synthesis.conclusion, "synthesis.conclusion"
        ) or _first(step.synthesis.output, recorded.synthesis.output, "synthesis.output")
    return "type", step.type, recorded.type


def _first(mine: Any, theirs: Any, path: str) -> _Found | None:
    """The first place (depth first, in key order) where two JSON-like values differ."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for key in [*theirs, *(k for k in mine if k not in theirs)]:
            if key not in mine or key not in theirs:
                return f"{path}.{key}", mine.get(key), theirs.get(key)
            found = _first(mine[key], theirs[key], f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(mine, list) and isinstance(theirs, list):
        for index, (one, other) in enumerate(zip(mine, theirs, strict=False)):
            found = _first(one, other, f"{path}.{index}")
            if found is not None:
                return found
        if len(mine) != len(theirs):
            return f"{path}.length", len(mine), len(theirs)
        return None
    return None if mine == theirs else (path, mine, theirs)


def _shown(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"
