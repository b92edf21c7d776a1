"""Where the service runs: its environment (development or production), its data dir and
its database."""

from pathlib import Path
from typing import Literal

from pydantic import Field

from app.config.values import Section
from app.errors import OmniForgeError


class InsecureSettings(OmniForgeError, ValueError):
    """Settings that would be unsafe outside development."""


class DeploymentSettings(Section):
    """The environment and the storage every other section may depend on."""

    env: Literal["development", "production"] = Field(
        default="development",
        description="`production` refuses to start without a strong JWT secret or a JWKS "
        "URL with issuer and audience.",
    )
    data_dir: Path = Field(
        default=Path("var"), description="Where the embedded SQLite database and dev secret live."
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy async URL, e.g. postgresql+asyncpg://user@host/db; "
        "default: a SQLite file in `data_dir`.",
    )
    database_pool_size: int = Field(
        default=10,
        ge=1,
        le=200,
        description="Postgres connections for steady load; bursts may open as many again, "
        "and what they open is kept (no connection opened per burst once warm). SQLite always "
        "uses one.",
    )

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'omniforge.db').resolve()}"
