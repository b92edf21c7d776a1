"""The A2A extension OmniForge declares on its agent cards and reads from remote agents.

A2A v1.0 has no way to say what a task spent, and `SubscribeToTask` cannot resume a stream
where a client lost it. This extension adds both without changing any A2A message:

- **Usage and cost.** Every `Task`, `TaskStatusUpdateEvent` and `TaskArtifactUpdateEvent` a
  server sends carries, under `metadata[EXTENSION_URI]`, a `FamilyUsage` object: the tokens,
  LLM calls and USD cost of the task and of every sub-agent task it started, so far (the
  cost as a decimal string, exact). A client that does not know the extension ignores it.
- **Resumable subscriptions.** Every streamed event carries `event_id` in the same object:
  the task's gap-free event number. A client that lost the stream calls `SubscribeToTask`
  with the HTTP header `Last-Event-ID: <event_id>` and gets exactly the events after it (no
  gap, no duplicate), then the live ones.
"""

from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.chain.money import USD

EXTENSION_URI = "https://omniforge.dev/a2a/extensions/usage-and-resume/v1"
"""Declared in `AgentCard.capabilities.extensions`; the key of the extension's metadata."""

LAST_EVENT_ID_HEADER = "Last-Event-ID"
"""What a client sends with `SubscribeToTask` to resume after the event it saw last."""


class FamilyUsage(BaseModel):
    """What a task and its sub-agent tasks have used so far. `cost_usd` sums priced calls;
    `unpriced_calls` counts the calls whose model has no price."""

    model_config = ConfigDict(extra="ignore")

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    total_tokens: int = Field(default=0, ge=0)
    llm_calls: int = Field(default=0, ge=0)
    cost_usd: USD = Decimal(0)
    unpriced_calls: int = Field(default=0, ge=0)
    event_id: int | None = Field(
        default=None, ge=1, description="On streamed events: the task's event number."
    )

    def metadata(self) -> dict[str, Any]:
        """The extension's entry of an A2A object's `metadata`."""
        return {EXTENSION_URI: self.model_dump(mode="json", exclude_none=True)}

    @classmethod
    def of(cls, metadata: Any) -> "FamilyUsage | None":
        """The extension's entry of a (JSON-like) `metadata`; None when absent or malformed
        (a remote agent's word is not trusted to be well formed)."""
        if not isinstance(metadata, dict):
            return None
        entry = metadata.get(EXTENSION_URI)
        if not isinstance(entry, dict):
            return None
        try:
            return cls.model_validate(entry)
        except ValidationError:
            return None
