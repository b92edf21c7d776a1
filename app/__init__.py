"""OmniForge: a multi-tenant agent service whose every operation is a recorded tool call."""
