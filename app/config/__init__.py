"""The one settings object: every knob is an `OMNIFORGE_*` environment variable. Its fields
are declared by section, one module each (`auth`, `api`, `runs`...)."""

from pydantic_settings import BaseSettings, SettingsConfigDict

from app.config.agents import AgentSettings
from app.config.api import ApiSettings
from app.config.auth import MIN_JWT_SECRET_BYTES, AuthSettings
from app.config.deployment import DeploymentSettings, InsecureSettings
from app.config.observability import ObservabilitySettings
from app.config.runs import MAX_RETENTION_DAYS, RunSettings
from app.config.sandboxes import SandboxSettings
from app.config.sealing import SealingSettings
from app.config.tools import ToolSettings
from app.config.webhooks import WebhookSettings

__all__ = ["MAX_RETENTION_DAYS", "MIN_JWT_SECRET_BYTES", "InsecureSettings", "Settings"]


# The sections in reverse: pydantic lists the fields of the last base first, and they are
# listed (as in the documentation's table) from the deployment's to the observability's.
class Settings(
    ObservabilitySettings,
    WebhookSettings,
    SandboxSettings,
    ToolSettings,
    SealingSettings,
    AgentSettings,
    RunSettings,
    ApiSettings,
    AuthSettings,
    DeploymentSettings,
    BaseSettings,
):
    """Runtime settings. Read once at start-up and passed down; nothing else reads the
    environment."""

    # Errors never echo what was given: a malformed key is still most of a key.
    model_config = SettingsConfigDict(
        env_prefix="OMNIFORGE_", extra="ignore", hide_input_in_errors=True
    )
