"""A tenant's conversations: stored with their turns, the tasks naming them (`store`), and
started, listed and read on behalf of callers (`service`). The runs rebuild a turn's history
from the store."""

from app.resources.conversations.service import AgentLookup, ConversationService

__all__ = ["AgentLookup", "ConversationService"]
