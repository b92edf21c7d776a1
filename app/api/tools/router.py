"""/api/v1/tools: the tools a caller's tasks may use, with their argument schemas."""

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.api.access import AnyCaller
from app.api.deps import State
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.chain import ToolType
from app.security.rbac import Permission
from app.tools.models import Egress, ToolDefinition
from app.tools.permissions import permits

router = APIRouter(prefix="/api/v1/tools", tags=["tools"], route_class=CheckedRoute)


class ToolOut(BaseModel):
    name: str
    type: ToolType
    description: str
    parameters: dict[str, Any]
    required_roles: list[str]
    idempotent: bool = Field(description=ToolDefinition.model_fields["idempotent"].description)
    untrusted_output: bool = Field(
        description=ToolDefinition.model_fields["untrusted_output"].description
    )
    private_output: bool = Field(
        description=ToolDefinition.model_fields["private_output"].description
    )
    egress: Egress = Field(description=ToolDefinition.model_fields["egress"].description)
    usable: bool


class ToolList(BaseModel):
    items: list[ToolOut]


@router.get("", summary="List tools", responses=problems(401, 403))
async def list_tools(caller: AnyCaller, state: State) -> ToolList:
    """The tools the caller's tenant enabled, its MCP servers' (`<server>__<tool>`) among them;
    `usable` says whether the caller may use each: its roles grant `tool:execute` and one of
    the tool's `required_roles` (tools it may not use are never offered to its runs). The LLM
    is not listed: every run uses it."""
    enabled = caller.tenant.enabled_tools
    registry = (await state.toolbox.for_tenant(caller.tenant)).registry
    executes = Permission.TOOL_EXECUTE in caller.permissions
    items = [
        ToolOut(
            name=definition.name,
            type=definition.type,
            description=definition.description,
            parameters=definition.parameters,
            required_roles=list(definition.permissions.required_roles),
            idempotent=definition.idempotent,
            untrusted_output=definition.untrusted_output,
            private_output=definition.private_output,
            egress=definition.egress,
            usable=executes and permits(definition, caller.roles),
        )
        for definition in registry.list_tools()
        if definition.type is not ToolType.LLM and (enabled is None or definition.name in enabled)
    ]
    return ToolList(items=items)
