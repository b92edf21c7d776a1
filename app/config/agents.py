"""The models agents call and how: the model list, the LLM calls' timeouts, retries and
connections, and the limits of an agent's loop."""

from pathlib import Path

from pydantic import Field

from app.config.values import Section


class AgentSettings(Section):
    """Models and LLM calls, and the defaults of every agent."""

    models_file: Path | None = Field(
        default=None,
        description="A LiteLLM `model_list` YAML (a LiteLLM proxy config works as is). "
        "The offline `demo` model is always available besides its models.",
    )
    default_model: str = Field(default="demo", description="Model used when a task names none.")
    max_iterations: int = Field(default=10, ge=1, le=100, description="ReAct loop limit.")
    max_result_chars: int = Field(
        default=16_000, ge=256, description="Tool results longer than this are truncated in steps."
    )
    llm_timeout_s: float = Field(
        default=180.0, gt=0, description="Whole LLM call, fallbacks included."
    )
    llm_request_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="One request to one deployment, unless the model list sets `timeout` for it.",
    )
    llm_openai_sdk: bool = Field(
        default=False,
        description="Send `openai/` models through the OpenAI SDK instead of LiteLLM's own HTTP "
        "handler (same requests, about 1 ms more CPU per call); implies "
        "`llm_direct_http=false`.",
    )
    llm_direct_http: bool = Field(
        default=True,
        description="Call OpenAI-compatible deployments that LiteLLM would only relay (an "
        "`openai/` model at an `api_base`, alone in its model group, no rate limits) over HTTP "
        "directly: the same requests, errors and prices, a fraction of LiteLLM's CPU per call. "
        "Off: every call goes through LiteLLM's Router.",
    )
    llm_max_attempts: int = Field(
        default=3, ge=1, le=10, description="Attempts per LLM call on timeouts, 429s and 5xx."
    )
    llm_initial_backoff_s: float = Field(
        default=0.5, ge=0, description="Backoff before the second attempt; doubles each time."
    )
    llm_max_backoff_s: float = Field(default=8.0, ge=0, description="Cap of the backoff.")
    llm_max_output_tokens: int = Field(
        default=4096, ge=1, description="Output cap the agent asks for, and budgets assume."
    )
    llm_max_connections: int = Field(
        default=20_000,
        ge=1,
        description="Most connections open to LLM providers at once, in all and to any one "
        "host: one per call in flight, so a call beyond it waits for one (and may time out). "
        "Read from the environment when the process starts (LiteLLM takes it at import); "
        "each needs a file descriptor.",
    )
    output_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Times an agent with a `response_format` may answer again after an answer "
        "that does not match it; then its task fails `invalid_output`.",
    )
    compact_at: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="A prompt larger than this share of its model's input window is compacted "
        "first: the oldest part of the conversation is summarised by one LLM call.",
    )
