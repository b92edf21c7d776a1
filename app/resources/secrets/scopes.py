"""Who may use a tenant secret: its `usable_by`, checked at every use. A secret without one is
usable by every agent, tool and role of its tenant (as every secret was before scopes)."""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.tools.services import SecretUse

MAX_ENTRIES = 64

Entry = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
]
Entries = Annotated[list[Entry], Field(max_length=MAX_ENTRIES)]


class UsableBy(BaseModel):
    """Which uses a secret allows. Each list left empty allows any; each given restricts:
    `agents`, the runs of these agents (by name, any version); `roles`, the runs of callers
    holding one of these roles; `tools`, `mcp_servers` and `remote_agents` together name what
    may send it (a tool such as `http_request` taking it by name, an MCP server or remote
    agent by name, whose headers name it): when any of the three is given, only what they
    list. Agents and roles are a run's: an MCP session opened (or a card fetched) outside a
    run is checked by sender alone, and each run's call through it by all three."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agents: Entries = Field(default_factory=list, description="Agents' names.")
    roles: Entries = Field(default_factory=list, description="Roles, any one of which will do.")
    tools: Entries = Field(
        default_factory=list, description="Tools taking it by name, e.g. `http_request`."
    )
    mcp_servers: Entries = Field(default_factory=list, description="MCP servers' names.")
    remote_agents: Entries = Field(default_factory=list, description="Remote agents' names.")

    def senders(self, use: SecretUse) -> list[str] | None:
        """What may send it among `use`'s kind of sender; None: any sender at all."""
        if not (self.tools or self.mcp_servers or self.remote_agents):
            return None
        match use.sender:
            case "tool":
                return self.tools
            case "mcp_server":
                return self.mcp_servers
            case "remote_agent":
                return self.remote_agents

    def refusal(self, name: str, use: SecretUse | None) -> str | None:
        """Why `use` may not use the secret `name` (naming no value), or None."""
        if use is None:
            if not self.model_dump(exclude_defaults=True):
                return None
            return f"the secret {name!r} is scoped (`usable_by`) and this use names no caller"
        senders = self.senders(use)
        if senders is not None and use.name not in senders:
            kind = _KINDS[use.sender]
            return f"the secret {name!r} may not be sent by the {kind} {use.name!r}" + _listed(
                f"{use.sender}s", senders
            )
        if use.task_id is None:  # outside a run: by sender alone
            return None
        agent = (use.agent or "").partition("@")[0]
        if self.agents and agent not in self.agents:
            return f"the secret {name!r} may not be used by runs of the agent {agent!r}" + (
                _listed("agents", self.agents)
            )
        if self.roles and not set(self.roles) & (use.roles or frozenset()):
            return (
                f"the secret {name!r} may not be used in runs of {use.user or 'this caller'!r}, "
                f"who holds none of its roles" + _listed("roles", self.roles)
            )
        return None


_KINDS = {"tool": "tool", "mcp_server": "MCP server", "remote_agent": "remote agent"}


def _listed(what: str, names: list[str]) -> str:
    return f" (usable_by.{what}: {', '.join(names) or 'none of this kind'})"


def refusal(usable_by: UsableBy | None, name: str, use: SecretUse | None) -> str | None:
    """Why `use` may not use the secret `name` scoped by `usable_by` (None: unscoped)."""
    return None if usable_by is None else usable_by.refusal(name, use)
