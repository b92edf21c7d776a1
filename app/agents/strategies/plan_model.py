"""A plan as the model writes it for `kind: plan`: a graph of steps, read from its reply and
checked before anything of it runs — ids unique, dependencies known and acyclic, the tools and
agents it names ones the run has, no more steps than the agent allows and no more calls than
the budget left can pay for."""

import graphlib
from collections.abc import Collection
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.agents.strategies.common import json_object

STEP_ID = r"^[a-z0-9][a-z0-9_-]{0,39}$"
_HINTS = ("direct", "cot")


class PlanStep(BaseModel):
    """One step: what it does, what it needs done first, what it should give."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: Annotated[str, Field(pattern=STEP_ID)]
    description: str = Field(min_length=1, max_length=4_000)
    type: Literal["reasoning", "tool", "agent"] = "reasoning"
    # `reasoning`: how to think it through (`direct` or `cot`).
    strategy: str = "cot"
    # `tool`: the tool and its arguments; `agent`: the agent's tool (`agent__name`).
    tool: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)
    expected_output: str | None = None
    # A JSON Schema the step's output must match (its contract).
    output_schema: dict[str, Any] | None = None
    # The model calls the step should take (a tool step: none).
    estimated_calls: int = Field(default=1, ge=0, le=50)


class Plan(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    steps: list[PlanStep] = Field(min_length=1)

    def graph(self) -> list[dict[str, Any]]:
        """The plan as its `plan_created` record carries it."""
        return [
            step.model_dump(exclude_defaults=True, exclude={"arguments"}) for step in self.steps
        ]


def read_plan(
    text: str,
    *,
    tools: Collection[str],
    agents: Collection[str],
    max_steps: int,
    calls_left: int | None,
    done: Collection[str] = (),
) -> tuple[Plan | None, list[str]]:
    """The plan a reply holds and what is wrong with it (a plan only when nothing is).
    `done`: steps of an earlier plan already finished, which a revised plan may depend on
    but not repeat."""
    document = json_object(text)
    if document is None:
        return None, ["the reply holds no JSON object with `steps`"]
    try:
        plan = Plan.model_validate(document)
    except ValidationError as exc:
        return None, [_field_error(error) for error in exc.errors()[:10]]
    problems: list[str] = []
    ids = [step.id for step in plan.steps]
    if len(ids) > max_steps:
        problems.append(f"the plan has {len(ids)} steps; at most {max_steps} are allowed")
    repeated = sorted({step for step in ids if ids.count(step) > 1 or step in done})
    if repeated:
        problems.append(f"step ids used twice (or by a finished step): {', '.join(repeated)}")
    known = {*ids, *done}
    for step in plan.steps:
        unknown = [dep for dep in step.depends_on if dep not in known]
        if unknown:
            problems.append(f"step {step.id} depends on unknown steps: {', '.join(unknown)}")
        if step.type == "tool" and step.tool not in tools:
            problems.append(
                f"step {step.id} uses tool {step.tool!r}, which this task does not have "
                f"(it has: {', '.join(sorted(tools)) or 'none'})"
            )
        if step.type == "agent" and step.tool not in agents:
            problems.append(
                f"step {step.id} calls agent {step.tool!r}, which this task cannot call "
                f"(it can call: {', '.join(sorted(agents)) or 'none'})"
            )
        if step.type == "reasoning" and step.strategy not in _HINTS:
            problems.append(
                f"step {step.id} reasons with {step.strategy!r}; a step reasons with "
                f"{' or '.join(_HINTS)}"
            )
    graph = {step.id: [dep for dep in step.depends_on if dep in ids] for step in plan.steps}
    sorter = graphlib.TopologicalSorter(graph)
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        problems.append(f"the steps depend on one another in a cycle: {' -> '.join(exc.args[1])}")
    estimated = sum(step.estimated_calls for step in plan.steps)
    if calls_left is not None and estimated > calls_left:
        problems.append(
            f"the steps' estimated model calls ({estimated}) are more than the budget "
            f"leaves ({calls_left})"
        )
    return (None if problems else plan), problems


def _field_error(error: Any) -> str:
    where = ".".join(str(part) for part in error.get("loc", ()))
    return f"at {where or 'the plan'}: {error.get('msg')}"
