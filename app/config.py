"""The one settings object: every knob is an `OMNIFORGE_*` environment variable."""

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Runtime settings. Read once at start-up and passed down; nothing else reads the
    environment."""

    model_config = SettingsConfigDict(env_prefix="OMNIFORGE_", extra="ignore")

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
        "handler (same requests, about 1 ms more CPU per call).",
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
