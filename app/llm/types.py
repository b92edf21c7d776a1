"""Requests to and answers from the LLM gateway."""

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from app.chain import FailedAttempt

DeltaKind = Literal["content", "reasoning"]
"""What a streamed piece of a reply is: the answer's text, or the model's reasoning (for
providers that stream it apart from the answer, as `reasoning_content`)."""


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """One chat completion. `model` is a model name of the model list (a router group)."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    # OpenAI's `{"type": "json_schema", "json_schema": {"name", "schema"}}`: the provider holds
    # the answer to the schema. Only for models whose every deployment supports it.
    response_format: dict[str, Any] | None = None
    # The models to fall back to, in order, instead of the model list's (e.g. only those the
    # tenant approved); None: the model list's fallbacks.
    fallbacks: list[str] | None = None


@dataclass(frozen=True, slots=True)
class LLMEstimate:
    """Pre-call estimate: prompt tokens counted, the output cap as output, the dearest
    deployment that may answer (fallbacks included). Cost is None if any is unpriced."""

    input_tokens: int
    max_output_tokens: int
    cost_usd: Decimal | None


@dataclass(frozen=True, slots=True)
class LLMToolCall:
    """A tool call as the model produced it; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class LLMResponse:
    """The answer, who gave it, what it used and cost (None when the price is unknown)."""

    content: str | None
    tool_calls: list[LLMToolCall]
    finish_reason: str | None
    model: str
    deployment: str
    provider: str
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal | None
    unpriced: bool
    failed_attempts: list[FailedAttempt] = field(default_factory=list)
    # The model's reasoning, for providers that return it apart from the answer.
    reasoning: str | None = None


@dataclass(frozen=True, slots=True)
class LLMDelta:
    """A piece of streamed text: of the answer (`content`) or of the reasoning."""

    text: str
    kind: DeltaKind = "content"


class StreamedReply:
    """A streamed reply's pieces as they come: the answer's text, the reasoning, and each tool
    call's fragments by the call's index; `delta` hands each piece of text on as an
    `LLMDelta`."""

    __slots__ = ("_calls", "_parts", "_thoughts", "finish_reason", "usage")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._thoughts: list[str] = []
        self._calls: dict[int, dict[str, str]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None

    def delta(self, text: str | None, kind: DeltaKind = "content") -> LLMDelta | None:
        if not text:
            return None
        (self._parts if kind == "content" else self._thoughts).append(text)
        return LLMDelta(text, kind)

    def call(self, index: int, id: str | None, name: str | None, arguments: str | None) -> None:
        slot = self._calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        slot["id"] = id or slot["id"]
        slot["name"] += name or ""
        slot["arguments"] += arguments or ""

    @property
    def content(self) -> str | None:
        return "".join(self._parts) or None

    @property
    def reasoning(self) -> str | None:
        return "".join(self._thoughts) or None

    @property
    def tool_calls(self) -> list[LLMToolCall]:
        return [
            LLMToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
            for i, c in sorted(self._calls.items())
        ]


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """Dollars per token, as registered for a deployment (model list or LiteLLM's map)."""

    input_cost_per_token: Decimal
    output_cost_per_token: Decimal
