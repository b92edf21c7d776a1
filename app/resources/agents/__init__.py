"""A tenant's agent definitions: named, with immutable versions (`store`), changed on behalf of
callers with their audit (`service`). The runs read the version a task names
(`app.runs.agents`), and say what a definition may hold."""

from app.resources.agents.service import (
    FROM_START,
    MAX_VERSION,
    AgentListing,
    AgentService,
    AgentVersion,
    Applied,
    BuiltinVersion,
    DefinitionRules,
    InvalidDefinition,
)
from app.resources.agents.store import (
    DEFAULT_AGENT,
    AgentArchived,
    AgentBuiltin,
    AgentExists,
)

__all__ = [
    "DEFAULT_AGENT",
    "FROM_START",
    "MAX_VERSION",
    "AgentArchived",
    "AgentBuiltin",
    "AgentExists",
    "AgentListing",
    "AgentService",
    "AgentVersion",
    "Applied",
    "BuiltinVersion",
    "DefinitionRules",
    "InvalidDefinition",
]
