"""Who may use a tool: its `required_roles`, checked when tools are offered to the model and
again by the executor's guard for every call the model makes anyway."""

from collections.abc import Iterable

from app.chain import ErrorCode, ToolResultInfo
from app.tools.errors import GuardRejection
from app.tools.guards import PendingCall
from app.tools.models import ToolDefinition


def permits(definition: ToolDefinition, roles: Iterable[str] | None) -> bool:
    """Whether a caller with `roles` may use the tool: any one of its required roles will do;
    no required roles, anyone. `roles` None means no caller to check (library use)."""
    required = definition.permissions.required_roles
    if roles is None or not required:
        return True
    return not set(required).isdisjoint(roles)


class ToolPermissionGuard:
    """Refuses a call to a tool the run's caller may not use: a failed step with
    `permission_denied`, never executed, and the run goes on."""

    async def before_call(self, call: PendingCall) -> None:
        if not permits(call.definition, call.context.roles):
            required = ", ".join(call.definition.permissions.required_roles)
            raise GuardRejection(
                ErrorCode.PERMISSION_DENIED,
                f"{call.definition.name} requires one of the roles: {required}",
                ends_run=False,
            )

    async def after_call(self, call: PendingCall, result: ToolResultInfo) -> None:
        return None

    def abandon(self, call: PendingCall) -> None:
        return None
