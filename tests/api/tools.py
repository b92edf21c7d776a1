"""Tools the service under test registers besides the built-in ones, the way an operator
registers its own: one with a sensitive argument, one only tenant admins may use."""

from typing import Any

from app.chain import ToolType, VisibilityLevel
from app.tools.base import BaseTool
from app.tools.models import (
    ToolCallContext,
    ToolDefinition,
    ToolOutput,
    ToolPermissions,
    ToolVisibilityConfig,
)

BUILTIN_TOOLS = ["calculator", "current_time"]


class VaultStore(BaseTool):
    """Stores a credential; its `password` argument must never reach restricted readers."""

    _definition = ToolDefinition(
        name="vault_store",
        type=ToolType.DATABASE,
        description="Stores a credential in the vault.",
        parameters={
            "type": "object",
            "properties": {"name": {"type": "string"}, "password": {"type": "string"}},
            "required": ["name", "password"],
        },
        visibility=ToolVisibilityConfig(
            default_level=VisibilityLevel.FULL,
            summary_template="stored the credential {name}",
            sensitive_fields=("password",),
        ),
        permissions=ToolPermissions(audit_level="full"),
    )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        return ToolOutput({"name": arguments["name"], "stored": True})


class AdminReport(BaseTool):
    """A report only tenant admins may run."""

    _definition = ToolDefinition(
        name="admin_report",
        type=ToolType.CUSTOM,
        description="Reports on the tenant's users.",
        permissions=ToolPermissions(required_roles=("tenant_admin",)),
    )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        return ToolOutput({"users": 3})


class Countdown(BaseTool):
    """Counts down from `n`, reporting each step as progress, then says how it went."""

    _definition = ToolDefinition(
        name="countdown",
        type=ToolType.EXTERNAL,
        description="Counts down from n, reporting its progress.",
        parameters={
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 20}},
            "required": ["n"],
        },
        visibility=ToolVisibilityConfig(summary_template="counted down from {n}"),
    )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        n = arguments["n"]
        for done in range(1, n + 1):
            context.progress(f"{n - done} left", done / n)
        return ToolOutput({"n": n, "reports": n})


TEST_TOOLS: list[BaseTool] = [VaultStore(), AdminReport(), Countdown()]
