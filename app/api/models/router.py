"""/api/v1/models: the models a caller's tasks may use, with their prices."""

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.api.access import AnyCaller
from app.api.deps import State
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.chain import USD

router = APIRouter(prefix="/api/v1/models", tags=["models"], route_class=CheckedRoute)


class DeploymentOut(BaseModel):
    id: str
    provider: str
    input_cost_per_token: USD | None = Field(description="USD; null: unpriced.")
    output_cost_per_token: USD | None
    supports_tools: bool
    supports_vision: bool = Field(
        description="Takes images: tools' images (e.g. read_file's) are shown to it."
    )


class ModelOut(BaseModel):
    name: str
    default: bool = Field(description="Used by tasks that name no model.")
    priced: bool = Field(
        description="Whether every deployment has a price (cost budgets and "
        "cost limits can only bound priced models)."
    )
    max_output_tokens: int | None = Field(description="The tenant's output cap, if any.")
    fallbacks: list[str] = Field(description="Approved models a failing call falls back to.")
    deployments: list[DeploymentOut]


class ModelList(BaseModel):
    items: list[ModelOut]


@router.get("", summary="List models", responses=problems(401, 403))
async def list_models(caller: AnyCaller, state: State) -> ModelList:
    """The models of the service's model list that the caller's tenant approved, with the
    price of each deployment (USD per token, exact decimals)."""
    gateway = state.runtime.gateway
    await gateway.loaded()  # prices and capabilities are LiteLLM's: not on the loop
    policy = caller.tenant.models
    default = policy.default_model or state.settings.default_model
    items = []
    for name in policy.approved_of(gateway.model_names()):
        deployments = [
            DeploymentOut(
                id=d.id,
                provider=d.provider,
                input_cost_per_token=d.price.input_cost_per_token if d.price else None,
                output_cost_per_token=d.price.output_cost_per_token if d.price else None,
                supports_tools=d.supports_tools,
                supports_vision=d.supports_vision,
            )
            for d in gateway.deployments(name)
        ]
        items.append(
            ModelOut(
                name=name,
                default=name == default,
                priced=all(d.input_cost_per_token is not None for d in deployments),
                max_output_tokens=policy.output_cap(name),
                fallbacks=policy.approved_of(gateway.fallbacks(name)),
                deployments=deployments,
            )
        )
    return ModelList(items=items)
