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
- **Hop trail.** A message an agent sends to a remote agent carries, under
  `metadata[EXTENSION_URI]["trail"]`, the ids of the tasks it comes from (the calling task
  first, then the tasks that called it, across services). A server that finds its own tasks
  on the trail knows the message comes back to it: it refuses an agent already working on
  the trail (a cycle) and counts the trail's depth against its depth limit.
"""

from collections.abc import Sequence
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


MAX_TRAIL = 64
"""At most this many task ids are sent on, or read from, a trail."""


def hop_metadata(trail: Sequence[str]) -> dict[str, Any]:
    """The extension's entry of a sent message's `metadata`: the trail it comes from."""
    return {EXTENSION_URI: {"trail": list(trail[:MAX_TRAIL])}}


def trail_of(metadata: Any) -> list[str]:
    """The trail a received message's (JSON-like) `metadata` carries; [] when none (or a
    malformed one: a remote's word is not trusted to be well formed)."""
    entry = metadata.get(EXTENSION_URI) if isinstance(metadata, dict) else None
    return checked_trail(entry.get("trail") if isinstance(entry, dict) else None)


def checked_trail(value: Any) -> list[str]:
    """`value` as a trail: its first `MAX_TRAIL` short strings; [] for anything else."""
    if not isinstance(value, list):
        return []
    return [item for item in value[:MAX_TRAIL] if isinstance(item, str) and len(item) <= 64]
