"""How the API serves requests: the caches of what it verifies, limits shared through Redis,
bodies, streams, and the browsers (CORS, the console's sign-in) it answers."""

import re
from typing import Self

from pydantic import Field, field_validator, model_validator

from app.config.values import CommaList, Section, comma_separated

# A browser origin as the `Origin` header sends it: scheme, host and optional port.
_ORIGIN = re.compile(r"https?://[^/\s:*]+(:[0-9]{1,5})?")


class ApiSettings(Section):
    """The HTTP API's requests, streams and browser access."""

    audit_flush_s: float = Field(
        default=0.2,
        ge=0,
        le=10,
        description="How long the audit events of stream openings may wait to be stored with "
        "other writes (a crash loses at most this much of them); chain reads are stored "
        "before they are answered.",
    )
    api_key_cache_s: float = Field(
        default=5.0,
        ge=0,
        description="How long a verified API key is cached per process: a key revoked through "
        "this process is refused at once, on other instances after at most this.",
    )
    tenant_cache_s: float = Field(
        default=5.0,
        ge=0,
        description="How long a tenant's settings (status, tools, visibility) are cached per "
        "process; a change made through this process applies at once, on others after this.",
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis URL (redis://host:6379/0): tenants' rate limits and cost windows are "
        "then shared by every instance. Unset: kept in this process (one instance).",
    )
    max_body_bytes: int = Field(
        default=2 * 1024 * 1024,
        ge=1024,
        description="Largest request body accepted; larger ones are refused with 413 before "
        "they are read.",
    )
    sse_keepalive_s: float = Field(
        default=15.0, gt=0, description="Idle time after which a stream sends a comment."
    )
    stream_ticket_ttl_s: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="How long a stream ticket (`POST /api/v1/tasks/{id}/stream-ticket`) "
        "opens its task's stream; a stream opened in time stays open.",
    )
    cors_origins: CommaList = Field(
        default_factory=list,
        description="Origins (`https://console.example.com`, scheme, host and port exactly) "
        "whose pages may call the API from a browser; none by default. Preflights are answered "
        "without a token; other origins get no CORS headers.",
    )
    console_oidc_client_id: str | None = Field(
        default=None,
        description="The web console's client id at the identity provider (a public client): "
        "with the two URLs below, the console offers to sign in there (authorization code with "
        "PKCE). Its tokens must pass the JWKS checks above.",
    )
    console_oidc_authorization_url: str | None = Field(
        default=None, description="The identity provider's authorization endpoint."
    )
    console_oidc_token_url: str | None = Field(
        default=None,
        description="The identity provider's token endpoint (it must allow the console's "
        "origin by CORS, as providers do for public clients).",
    )
    console_oidc_scope: str = Field(
        default="openid profile", description="Scopes the console asks the identity provider for."
    )
    client_errors_per_minute: int | None = Field(
        default=600,
        ge=1,
        description="Requests of one tenant a minute that may end in a client error (4xx); "
        "past them its requests are refused with 429 `rate-limited` until the window frees up. "
        "Unset: no limit.",
    )

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _cors_origins_split(cls, value: object) -> object:
        return comma_separated(value)

    @field_validator("cors_origins")
    @classmethod
    def _cors_origins_are_origins(cls, value: list[str]) -> list[str]:
        for origin in value:
            if _ORIGIN.fullmatch(origin) is None:
                raise ValueError(
                    f"OMNIFORGE_CORS_ORIGINS: {origin!r} is not an origin (scheme://host[:port], "
                    "no path, no trailing slash, no wildcard)"
                )
        return value

    @model_validator(mode="after")
    def _console_sign_in_is_whole(self) -> Self:
        """The console's identity-provider sign-in needs its client id and both endpoints."""
        parts = {
            "OMNIFORGE_CONSOLE_OIDC_CLIENT_ID": self.console_oidc_client_id,
            "OMNIFORGE_CONSOLE_OIDC_AUTHORIZATION_URL": self.console_oidc_authorization_url,
            "OMNIFORGE_CONSOLE_OIDC_TOKEN_URL": self.console_oidc_token_url,
        }
        missing = [name for name, value in parts.items() if not value]
        if missing and len(missing) < len(parts):
            raise ValueError(f"the console's sign-in also needs {', '.join(missing)}")
        for name in list(parts)[1:]:
            url = parts[name]
            if url and not url.startswith(("https://", "http://")):
                raise ValueError(f"{name} must be an http(s) URL: {url!r}")
        return self
