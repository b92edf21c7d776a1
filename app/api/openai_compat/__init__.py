"""The OpenAI-compatible endpoint (`/v1/chat/completions`, `/v1/models`): a "model" is one of
the tenant's agents, a completion is a task run by it, so OpenAI SDKs and the tools built on
them work by changing their base URL."""
