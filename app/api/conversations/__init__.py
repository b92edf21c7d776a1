"""/api/v1/conversations: multi-turn conversations with an agent."""
