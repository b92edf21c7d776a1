"""Model governance: which models a tenant's runs may reach, its default, output caps."""

from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.chain import ErrorCode, ToolResultInfo, ToolType
from app.tools.errors import GuardRejection

if TYPE_CHECKING:
    # Only named: importing the guard protocol at run time would import the tool layer (and
    # LiteLLM with it) into every process that reads a tenant, the CLI's light commands too.
    from app.tools.guards import PendingCall

ModelPattern = Annotated[str, Field(min_length=1, max_length=255)]


class ModelPolicy(BaseModel):
    """A tenant's model policy. `approved` names models of the model list, `*` and `?`
    matching any characters (`gpt-4o*`); null approves every configured model."""

    model_config = ConfigDict(extra="forbid")

    approved: list[ModelPattern] | None = Field(
        default=None,
        max_length=256,
        description="Approved model names; `*` and `?` are wildcards. null: every model.",
    )
    default_model: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="Used when a task names no model (default: the service's).",
    )
    max_output_tokens: dict[ModelPattern, Annotated[int, Field(gt=0)]] = Field(
        default_factory=dict,
        description="Output-token cap per model name or pattern; a call asking for more is "
        "capped, whichever of its fallbacks answers.",
    )
    complexity_assessment: Literal["model", "heuristic"] = Field(
        default="model",
        description="How `auto` agents score a task's complexity: `model`, as each agent's "
        "definition says (by default one cheap call with a stated rubric); `heuristic`, by "
        "the task's wording alone, never a model call.",
    )

    def approves(self, model: str) -> bool:
        if self.approved is None:
            return True
        return any(fnmatchcase(model, pattern) for pattern in self.approved)

    def output_cap(self, model: str) -> int | None:
        """The model's own cap if named exactly, else the smallest of the patterns matching."""
        if model in self.max_output_tokens:
            return self.max_output_tokens[model]
        caps = [cap for p, cap in self.max_output_tokens.items() if fnmatchcase(model, p)]
        return min(caps) if caps else None

    def approved_of(self, models: list[str]) -> list[str]:
        return [model for model in models if self.approves(model)]


class ModelPolicyGuard:
    """Refuses an LLM call to a model the tenant did not approve, whoever makes it (the agent,
    a tool's sub-call): a failed step `model_not_approved` that ends the run. Fallbacks the
    tenant did not approve are dropped from the call itself (the LLM tool asks the policy
    through the call context), so the router never reaches them either."""

    def __init__(self, policy: ModelPolicy, *, default_model: str, available: list[str]) -> None:
        self._policy = policy
        self._default_model = default_model
        self._approved = policy.approved_of(available)

    async def before_call(self, call: "PendingCall") -> None:
        if call.definition.type is not ToolType.LLM:
            return
        model = call.arguments.get("model") or self._default_model
        if not self._policy.approves(model):
            approved = ", ".join(self._approved) or "none"
            raise GuardRejection(
                ErrorCode.MODEL_NOT_APPROVED,
                f"model {model!r} is not approved for this tenant; approved: {approved}",
                details={"model": model, "approved": self._approved},
            )

    async def after_call(self, call: "PendingCall", result: ToolResultInfo) -> None:
        return None

    def abandon(self, call: "PendingCall") -> None:
        return None
