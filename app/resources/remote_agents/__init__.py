"""A tenant's remote A2A agents: stored with their cards as last fetched (`store`), changed on
behalf of callers with their audit (`service`), and offered to runs as the tools their skills
become (`skills`)."""

from typing import TYPE_CHECKING

from app.lazy import lazy_attributes
from app.resources.remote_agents.store import RemoteAgentExists, RemoteAgentRecord

if TYPE_CHECKING:
    from app.resources.remote_agents.service import (
        RemoteAgentService,
        RemoteAgentsUnavailable,
        UnusableCard,
    )
    from app.resources.remote_agents.skills import RemoteAgents

# The service and the skills import the A2A SDK: imported when first used, not by whoever
# reads only the store (the secrets' checks of headers, the CLI).
__getattr__ = lazy_attributes(
    __name__,
    {
        "RemoteAgentService": "app.resources.remote_agents.service",
        "RemoteAgentsUnavailable": "app.resources.remote_agents.service",
        "UnusableCard": "app.resources.remote_agents.service",
        "RemoteAgents": "app.resources.remote_agents.skills",
    },
)

__all__ = [
    "RemoteAgentExists",
    "RemoteAgentRecord",
    "RemoteAgentService",
    "RemoteAgents",
    "RemoteAgentsUnavailable",
    "UnusableCard",
]
