"""How many connections the model calls may hold open, in all and per host: LiteLLM's pool
and the direct calls' (`OMNIFORGE_LLM_MAX_CONNECTIONS`), read from the environment before
LiteLLM is imported (it sizes its pool as it is)."""

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

# `Settings.llm_max_connections`' default: the settings object (which this package may not
# import) validates the same variable at start-up; a test keeps the two defaults equal.
DEFAULT_MAX_CONNECTIONS = 20_000


class _ImportTimeSettings(BaseSettings):
    """What LiteLLM takes from the environment as it is imported, before the settings object
    is built: read alone, so that no other setting is checked this early."""

    model_config = SettingsConfigDict(env_prefix="OMNIFORGE_", extra="ignore")

    llm_max_connections: int = Field(default=DEFAULT_MAX_CONNECTIONS, ge=1)


def _max_connections() -> int:
    try:
        return _ImportTimeSettings().llm_max_connections
    except ValidationError:
        return DEFAULT_MAX_CONNECTIONS  # the settings object refuses it, with its message


MAX_CONNECTIONS = _max_connections()
