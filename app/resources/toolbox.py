"""What a tenant's runs find as tools: the process's tools with the tenant's own (its MCP
servers'), and, for one run, the services those tools reach (its secrets, files, todo list and
network allow-list)."""

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from app.config import Settings
from app.governance.tenants import Tenant
from app.resources.files import FileLibrary
from app.resources.mcp_servers import McpServers
from app.resources.remote_agents import RemoteAgents
from app.resources.sandboxes import Workspaces
from app.resources.secrets import SecretVault
from app.resources.todos import TodoLists
from app.storage.records import NetworkAllow
from app.tools.base import BaseTool
from app.tools.builtin import builtin_tools
from app.tools.plugins import load_plugin_tools
from app.tools.registry import ToolRegistry
from app.tools.services import NetworkPolicy, ToolServices


def process_tools(settings: Settings, extra: Sequence[BaseTool] = ()) -> list[BaseTool]:
    """The tools a process offers every tenant: the built-in ones (the HTTP tools with the
    settings' limits), `extra`, then plugins' (`omniforge.tools` entry points and
    OMNIFORGE_TOOL_MODULES; `PluginError` names one that cannot be loaded)."""
    tools = [
        *builtin_tools(
            fetch_max_bytes=settings.fetch_max_bytes,
            fetch_timeout_s=settings.fetch_timeout_s,
            fetch_user_agent=settings.fetch_user_agent,
        ),
        *extra,
    ]
    reserved = [tool.definition.name for tool in tools]
    return [*tools, *load_plugin_tools(settings.tool_modules, reserved=reserved)]


@dataclass(frozen=True, slots=True)
class TenantTools:
    """One tenant's tools (`registry`) and where its HTTP tools may go (`network`: its
    allow-list with the operator's)."""

    tenant_id: str
    registry: ToolRegistry
    network: NetworkPolicy
    toolbox: "Toolbox"

    async def services(
        self,
        task_id: UUID,
        file_ids: Sequence[str] = (),
        *,
        user: str,
        conversation_id: UUID | None = None,
    ) -> ToolServices:
        """The services of one run of this tenant for `user`: `file_ids` are the files
        given to it; its file tools read what `user` may read; its workspace is its
        conversation's (else its own)."""
        box = self.toolbox
        files, workspaces = box.files, box.workspaces
        return ToolServices(
            secrets=None if box.secrets is None else await box.secrets.resolver(self.tenant_id),
            files=None if files is None else files.access(self.tenant_id, file_ids, user=user),
            todos=None if box.todos is None else box.todos.for_task(self.tenant_id, task_id),
            network=self.network,
            workspace=None
            if workspaces is None
            else workspaces.for_run(
                self.tenant_id, conversation_id=conversation_id, task_id=task_id
            ),
        )


class Toolbox:
    """Every tenant's tools and services; each part is optional (a process without a database
    has none of them)."""

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        network: NetworkPolicy | None = None,
        secrets: SecretVault | None = None,
        files: FileLibrary | None = None,
        todos: TodoLists | None = None,
        mcp: McpServers | None = None,
        remote_agents: RemoteAgents | None = None,
        workspaces: Workspaces | None = None,
    ) -> None:
        self.registry = registry
        self.network = network or NetworkPolicy()
        self.secrets = secrets
        self.files = files
        self.todos = todos
        self.mcp = mcp
        self.remote_agents = remote_agents
        self.workspaces = workspaces

    async def for_tenant(self, tenant: Tenant) -> TenantTools:
        own = [] if self.mcp is None else await self.mcp.tools_for(tenant.id)
        if self.remote_agents is not None:  # its remote A2A agents' skills
            own = [*own, *await self.remote_agents.tools_for(tenant.id)]
        registry = self.registry.extended(own) if own else self.registry
        return TenantTools(tenant.id, registry, self.network_of(tenant), self)

    def network_of(self, tenant: Tenant) -> NetworkPolicy:
        allowed = NetworkAllow.of(tenant.record.network_allow).effective
        return self.network.merged(NetworkPolicy.of(allowed)) if allowed else self.network
