"""The OpenAI Chat Completions shapes this endpoint reads and answers (the subset it honours)."""

from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.api.errors import Problem
from app.runs.models import MAX_INPUT_CHARS, ChatMessage

_CLIENT_TOOLS = (
    "the agent runs its own tools server-side; a completion cannot offer client-side tools"
)


class CompletionMessage(BaseModel):
    """A message in OpenAI format. `developer` counts as `system`; content parts must be
    text. Other fields (`name`, `tool_calls`, `tool_call_id`...) pass through to the task."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None

    @field_validator("content")
    @classmethod
    def _text_parts(cls, content: str | list[dict[str, Any]] | None) -> Any:
        if isinstance(content, list):
            for part in content:
                if part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise ValueError(
                        "only text parts are supported (give files through /api/v1/files)"
                    )
        return content

    def as_chat_message(self) -> ChatMessage:
        content = self.content
        if isinstance(content, list):
            content = "\n".join(part["text"] for part in content)
        role = "system" if self.role == "developer" else self.role
        return ChatMessage.model_validate(
            {**(self.model_extra or {}), "role": role, "content": content}
        )


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """`POST /v1/chat/completions`. `model` names an agent (`agent:<name>[@N]` or
    `<name>[@N]`); the agent's own model, tools and settings run it. Sampling parameters
    (`temperature`, `top_p`, `max_tokens`, `seed`, `stop`...) are accepted and ignored: the
    agent owns them. `metadata` becomes the task's metadata. Client-side `tools`, `n` above
    1 and response formats other than `text` are refused (422)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"model": "agent:default", "messages": [{"role": "user", "content": "17 * 23?"}]}
            ]
        },
    )

    model: str = Field(min_length=1, max_length=255)
    messages: list[CompletionMessage] = Field(min_length=1, max_length=500)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=None, ge=1, le=128)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    metadata: dict[str, str] | None = Field(default=None, max_length=16)
    user: str | None = Field(default=None, max_length=256)
    # Accepted and ignored: the agent's definition decides how its model is called.
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    logit_bias: dict[str, float] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    seed: int | None = None
    stop: str | list[str] | None = None
    store: bool | None = None
    service_tier: str | None = Field(default=None, max_length=64)
    reasoning_effort: str | None = Field(default=None, max_length=64)
    parallel_tool_calls: bool | None = None

    @field_validator("n")
    @classmethod
    def _one_choice(cls, n: int | None) -> int | None:
        if n is not None and n != 1:
            raise ValueError("a completion has one choice: the agent's answer")
        return n

    @field_validator("tools", "functions")
    @classmethod
    def _no_client_tools(cls, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        if tools:
            raise ValueError(_CLIENT_TOOLS)
        return tools

    @field_validator("tool_choice", "function_call")
    @classmethod
    def _no_tool_choice(cls, choice: str | dict[str, Any] | None) -> Any:
        if choice not in (None, "none", "auto"):
            raise ValueError(_CLIENT_TOOLS)
        return choice

    @field_validator("response_format")
    @classmethod
    def _text_only(cls, response_format: dict[str, Any] | None) -> dict[str, Any] | None:
        if response_format is not None and response_format != {"type": "text"}:
            raise ValueError("only `text`: an agent's response_format is part of its definition")
        return response_format

    @field_validator("messages")
    @classmethod
    def _bounded(cls, messages: list[CompletionMessage]) -> list[CompletionMessage]:
        chars = sum(message.as_chat_message().chars for message in messages)
        if chars > MAX_INPUT_CHARS:
            raise ValueError(f"hold {chars} characters; at most {MAX_INPUT_CHARS} in all")
        return messages

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class CompletionUsage(BaseModel):
    """The task's whole usage: every LLM call of its run."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    refusal: None = None


FinishReason = Literal["stop", "length"]


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: FinishReason = Field(
        description="`length` when one of the run's limits stopped it and the answer is what "
        "the agent had by then (the task is `incomplete`)."
    )
    logprobs: None = None


class ChatCompletion(BaseModel):
    id: str = Field(description="`chatcmpl-` and the task's id.")
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str = Field(description="The agent version that ran: `agent:<name>@<version>`.")
    choices: list[Choice]
    usage: CompletionUsage


class ChunkDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    finish_reason: FinishReason | None = None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: CompletionUsage | None = None


class OpenAIModel(BaseModel):
    id: str = Field(description="`agent:<name>`: what `model` names to run the agent.")
    object: Literal["model"] = "model"
    created: int = Field(description="When the agent was defined (Unix seconds).")
    owned_by: str = Field(description="The tenant.")


class OpenAIModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[OpenAIModel]


class OpenAIError(BaseModel):
    """What OpenAI SDKs read from an error body and show."""

    message: str
    type: str
    code: str | None
    param: str | None


class CompletionProblem(Problem):
    """A problem of the OpenAI-compatible endpoint: with the OpenAI-style `error`, and for
    a run that failed, its task and why."""

    error: OpenAIError
    task_id: UUID | None = Field(default=None, description="The failed run's task.")
    error_code: str | None = Field(default=None, description="Why the run failed.")
