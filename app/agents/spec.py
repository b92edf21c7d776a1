"""What an agent definition asks of the runtime: its kind, instructions, model, tools and
limits. The service stores definitions (named, versioned, per tenant); the runtime only ever
sees the `AgentSpec` of the version a task runs."""

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.tools.approvals import ApprovalRules
from app.tools.models import TOOL_NAME_PATTERN
from app.tools.subagents import SUB_AGENT_REF_PATTERN

KIND_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
DEFAULT_KIND = "react"

OnLimit = Literal["fail", "answer"]
ToolName = Annotated[str, Field(pattern=TOOL_NAME_PATTERN)]
ToolEntry = Annotated[str, Field(pattern=f"({TOOL_NAME_PATTERN})|({SUB_AGENT_REF_PATTERN})")]
"""A tool's name, or another agent of the tenant as a tool: `agent:name` or `agent:name@N`."""


class AgentApprovals(ApprovalRules):
    """Which of the agent's tool calls wait for a human, besides its tenant's rules and the
    tools' own, and who may decide."""

    submitter_decides: bool = Field(
        default=False,
        description="Whether a task's submitter may decide on its calls, besides the holders "
        "of `task:approve` (tenant admins).",
    )


SIMPLER = ("plan", "mcts", "tot", "react", "cot", "direct")
"""The built-in strategies from the deepest to the simplest: a strategy that fails falls back to
the next one after it (under `auto`)."""


class _Options(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TreeSearchOptions(_Options):
    """`tot`: at each level every kept thought is extended by `breadth` proposals, each scored
    by the model; the `beam` best go on, `depth` levels deep; the answer follows the best
    path."""

    breadth: int = Field(default=3, ge=1, le=8, description="Thoughts proposed per node.")
    depth: int = Field(default=2, ge=1, le=5, description="Levels of thoughts.")
    beam: int = Field(default=2, ge=1, le=8, description="Thoughts kept per level.")


class MonteCarloOptions(_Options):
    """`mcts`: each simulation selects a node by UCB1, expands it by one ReAct step, rolls it
    out to an answer and has the model score it; the best-scored answer is the run's."""

    simulations: int = Field(default=6, ge=1, le=64, description="Simulations of the search.")
    breadth: int = Field(
        default=2,
        ge=1,
        le=5,
        description="Children a node gets before the search selects among them.",
    )
    max_depth: int = Field(default=3, ge=1, le=8, description="ReAct steps from the root at most.")
    exploration: float = Field(default=1.4, ge=0, le=10, description="UCB1's exploration constant.")


class PlanOptions(_Options):
    """`plan`: how large a plan may be, how much of it runs at once, and how often it is
    tried again."""

    max_steps: int = Field(default=8, ge=1, le=32, description="Steps a plan may have.")
    max_parallel_steps: int = Field(
        default=4, ge=1, le=16, description="Steps of a wave that run at once."
    )
    step_retries: int = Field(
        default=1, ge=0, le=3, description="Tries of a failed step before the plan is revised."
    )
    max_replans: int = Field(
        default=2, ge=0, le=5, description="Revisions of a plan before the run fails."
    )


class ComplexityBand(_Options):
    """Tasks scored below `below` (and at or above the band before it) run `strategy`."""

    below: float = Field(gt=0, le=1)
    strategy: str = Field(pattern=KIND_PATTERN)


DEFAULT_BANDS = (
    ComplexityBand(below=0.3, strategy="direct"),
    ComplexityBand(below=0.6, strategy="cot"),
    ComplexityBand(below=1.0, strategy="react"),
)


class AutoOptions(_Options):
    """`auto`: how a task's complexity is assessed, and which strategy each score runs."""

    assess: Literal["model", "heuristic"] = Field(
        default="model",
        description="`model`: one cheap call with a stated rubric scores the task (0 to 1); "
        "`heuristic`: its length and wording do, without a call.",
    )
    table: tuple[ComplexityBand, ...] = Field(
        default=DEFAULT_BANDS,
        min_length=1,
        max_length=8,
        description="Bands of complexity, ascending, the last ending at 1: a task runs the "
        "strategy of the first band its score is below (a score of 1 runs the last's).",
    )

    @model_validator(mode="after")
    def _ascending(self) -> Self:
        bounds = [band.below for band in self.table]
        if bounds != sorted(set(bounds)) or bounds[-1] != 1.0:
            raise ValueError("`table` bands must ascend, each below a higher bound, to 1")
        for band in self.table:
            if band.strategy not in SIMPLER:
                raise ValueError(
                    f"`table` names {band.strategy!r}; a band runs one of {', '.join(SIMPLER)}"
                )
        return self


class StrategyOptions(_Options):
    """How the agent's strategy reasons; each kind reads its own part."""

    tot: TreeSearchOptions = Field(default_factory=TreeSearchOptions)
    mcts: MonteCarloOptions = Field(default_factory=MonteCarloOptions)
    plan: PlanOptions = Field(default_factory=PlanOptions)
    auto: AutoOptions = Field(default_factory=AutoOptions)
    min_confidence: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Under `auto`, an answer whose strategy is less sure of it than this (a "
        "search's best score, a stated confidence) counts as a failure: the run falls back "
        "to the next simpler strategy.",
    )


class AgentSpec(BaseModel):
    """How one agent runs. Every field left unset behaves as the built-in default agent does
    (the service's settings, its tenant's defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = Field(
        default=DEFAULT_KIND,
        pattern=KIND_PATTERN,
        description="The agent's strategy: `direct` (one call), `cot` (one call that "
        "reasons step by step first), `react` (tools in a loop; the default), `tot` (a tree of "
        "thoughts, scored by the model), `mcts` (Monte Carlo tree search over ReAct steps), "
        "`plan` (a graph of steps run in parallel waves), `auto` (chosen by the task's "
        "complexity, falling "
        "back to simpler ones), or a kind a plugin registers under the "
        "`omniforge.agent_kinds` entry point group.",
    )
    strategy: StrategyOptions | None = Field(
        default=None, description="Options of the strategies (unset: their defaults)."
    )
    instructions: str | None = Field(
        default=None,
        min_length=1,
        max_length=100_000,
        description="The system prompt. A task's own `system` messages come after it, never "
        "instead of it. Unset: the built-in ReAct prompt.",
    )
    model: str | None = Field(
        default=None, min_length=1, max_length=255, description="A model of the model list."
    )
    fallback_model: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="A cheaper model of the model list a run steps down to near its budget's "
        "limit: `auto` runs on it when the budget left cannot pay for one call on the run's "
        "model, and with `on_limit: answer` the last answer is made on it when that is so.",
    )
    tools: list[ToolEntry] | None = Field(
        default=None,
        max_length=128,
        description="The tools it may use; unset: every tool its tenant enabled. "
        "`agent:name` (or `agent:name@N`, a pinned version) makes another agent of the "
        "tenant a tool (`agent__name`, of type `sub_agent`): a call runs it on a task of "
        "its own, a child of this one, and answers with its answer.",
    )
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_iterations: int | None = Field(default=None, ge=1, le=200)
    max_output_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    response_format: dict[str, Any] | None = Field(
        default=None,
        description="A JSON Schema the final answer must match; the valid answer is the "
        "task's `output`.",
    )
    on_limit: OnLimit = Field(
        default="fail",
        description="When `max_iterations` or a budget stops a run: `fail` (the task fails "
        "with the limit's error code) or `answer` (the agent keeps back what one last "
        "tool-less call needs, makes it, and the task ends `incomplete` with that answer).",
    )
    approvals: AgentApprovals | None = Field(
        default=None,
        description="Tool calls that wait for a human's approval before they are made: by "
        "tool name (`tools`) or type (`types`), `always` or `never`; the strictest of the "
        "tool's, the tenant's and these rules applies.",
    )

    def assessed_by_heuristic(self) -> Self:
        """This spec with `auto` scoring a task's complexity by its wording alone, never a
        model call (a tenant's model policy may ask for that)."""
        options = self.strategy or StrategyOptions()
        auto = options.auto.model_copy(update={"assess": "heuristic"})
        return self.model_copy(update={"strategy": options.model_copy(update={"auto": auto})})
