"""The one settings object: every knob is an `OMNIFORGE_*` environment variable."""

import base64
import binascii
import contextlib
import os
import re
import secrets
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.errors import OmniForgeError

MIN_JWT_SECRET_BYTES = 32
SECRETS_KEY_BYTES = 32
# The longest retention a tenant or the platform may set: ten years.
MAX_RETENTION_DAYS = 3650
_DEV_SECRET_FILE = "jwt-secret"
_DEV_SECRETS_KEY_FILE = "secrets-key"

# A browser origin as the `Origin` header sends it: scheme, host and optional port.
_ORIGIN = re.compile(r"https?://[^/\s:*]+(:[0-9]{1,5})?")
# A list setting written as comma-separated values (`a,b,c`) in its environment variable.
CommaList = Annotated[list[str], NoDecode]


class InsecureSettings(OmniForgeError, ValueError):
    """Settings that would be unsafe outside development."""


class Settings(BaseSettings):
    """Runtime settings. Read once at start-up and passed down; nothing else reads the
    environment."""

    # Errors never echo what was given: a malformed key is still most of a key.
    model_config = SettingsConfigDict(
        env_prefix="OMNIFORGE_", extra="ignore", hide_input_in_errors=True
    )

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
        description="Postgres connections kept open (as many again "
        "may open under bursts); SQLite always uses one.",
    )
    jwt_secret: SecretStr | None = Field(
        default=None,
        description=f"HS256 key, at least {MIN_JWT_SECRET_BYTES} bytes. In development an unset "
        "secret is generated once and kept in `data_dir`.",
    )
    jwt_leeway_s: float = Field(default=30.0, ge=0, description="Clock skew allowed on exp/nbf.")
    jwt_jwks_url: str | None = Field(
        default=None,
        description="JWKS of an external identity provider (Keycloak, Auth0, Okta...): its "
        "RS256/ES256 tokens are accepted besides HS256 ones. Keys are cached and fetched "
        "again when a token names an unknown `kid`.",
    )
    jwt_issuer: str | None = Field(
        default=None,
        description="Required `iss` of every token, the identity provider's and HS256 ones "
        "alike (`omniforge token` puts it in the tokens it mints). Unset: `iss` is not checked.",
    )
    jwt_audience: str | None = Field(
        default=None,
        description="Required `aud` of every token, the identity provider's and HS256 ones "
        "alike (`omniforge token` puts it in the tokens it mints). Unset: `aud` is not checked.",
    )
    jwt_algorithms: list[Literal["RS256", "RS384", "RS512", "ES256", "ES384", "PS256"]] = Field(
        default=["RS256", "ES256"], description="Asymmetric algorithms accepted with the JWKS."
    )
    jwt_tenant_claim: str = Field(
        default="tenant_id",
        description="Claim holding the tenant id; a dotted path reaches into objects "
        "(e.g. `org.id`); a claim whose name contains dots (Auth0 namespaces) is found as is.",
    )
    jwt_roles_claim: str = Field(
        default="roles",
        description="Claim holding the roles (a list, or a space-separated string), e.g. "
        "`realm_access.roles` for Keycloak or `groups` for Okta.",
    )
    jwt_jwks_cache_s: float = Field(
        default=3600.0, gt=0, description="How long fetched JWKS keys are used before refetching."
    )
    jwt_jwks_refresh_cooldown_s: float = Field(
        default=30.0,
        ge=0,
        description="Minimum time between refetches caused by unknown `kid`s (a flood of forged "
        "tokens must not become a flood of requests to the identity provider).",
    )
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
    runner_heartbeat_s: float = Field(
        default=10.0,
        gt=0,
        description="How often a server renews its lease on its runs; one silent for three "
        "intervals is presumed dead and its runs are resumed by another server.",
    )
    shutdown_grace_s: float = Field(
        default=5.0,
        ge=0,
        description="On shutdown (SIGTERM), the whole drain: runs start no new call, the calls "
        "under way finish and are stored, runs are handed to another server and streams end "
        "for their clients to reconnect there — all within this. A call still under way "
        "past it is cut (counted in `omniforge_calls_cut_total`) and made again where its run "
        "resumes.",
    )
    store_outage_s: float = Field(
        default=300.0,
        gt=0,
        description="How long runs wait out a store (database) outage: they start no new call "
        "meanwhile and keep the results of calls under way until they can be stored. Past "
        "it, a run is let go to be resumed from what is stored (never failed).",
    )
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="A second port `omniforge serve` listens on (same host) for `/metrics` "
        "alone: the API's port then answers `/metrics` with 404, so a scraper reaches it on a "
        "port that is never published (none: `/metrics` on the API's port, no token).",
    )
    max_concurrent_runs: int = Field(
        default=1000,
        ge=1,
        le=1_000_000,
        description="Runs this server takes from the queue at most at once; the rest wait "
        "for room here or on another server.",
    )
    max_concurrent_submissions: int = Field(
        default=16,
        ge=1,
        le=10_000,
        description="Submissions this server stores and starts at most at once; more wait "
        "their turn in arrival order, so a burst's last task does not wait for the work of "
        "every run the burst started before it.",
    )
    resume: bool = Field(
        default=True,
        description="Resume a run whose server stopped from its stored steps (false: such "
        "runs end `interrupted`).",
    )
    max_resumes: int = Field(
        default=3,
        ge=0,
        le=100,
        description="A run whose server stopped this many times while running it ends "
        "`interrupted` instead of being resumed again.",
    )
    max_agent_depth: int = Field(
        default=3,
        ge=0,
        le=10,
        description="How deep sub-agents may nest: a task is at depth 0, the task of a "
        "sub-agent it calls at 1, and so on; a call that would go deeper fails "
        "`agent_depth_exceeded` (0: no sub-agents).",
    )
    approval_timeout_s: float = Field(
        default=86_400.0,
        gt=0,
        le=30 * 86_400,
        description="How long a tool call waits for a human's approval before it is denied "
        "on its own, unless its agent's or tenant's rules set `timeout_s`.",
    )
    idempotency_key_ttl_s: float = Field(
        default=86_400.0,
        ge=60,
        le=30 * 86_400,
        description="How long a task submission's `Idempotency-Key` answers with the task it "
        "made; after that the key may be used again.",
    )
    scheduler: bool = Field(
        default=True,
        description="Fire the tenants' schedules from this process. Every instance may: each "
        "firing is claimed by exactly one of them.",
    )
    retention_days: int = Field(
        default=90,
        ge=1,
        le=MAX_RETENTION_DAYS,
        description="How long a finished task (its chain, steps, events and costs), a "
        "conversation after its last activity, and an uploaded file are kept, for tenants "
        "that set no `retention_days` of their own. The daily usage roll-up is kept anyway.",
    )
    audit_retention_days: int = Field(
        default=400,
        ge=1,
        le=MAX_RETENTION_DAYS,
        description="How long audit events are kept, for tenants that set no "
        "`audit_retention_days` of their own.",
    )
    purge_interval_s: float = Field(
        default=86_400.0,
        ge=0,
        description="How often this process runs the retention purge (one instance at a time "
        "across the cluster; the first run comes within an hour of start-up); 0: never.",
    )
    purge_batch_size: int = Field(
        default=200,
        ge=1,
        le=10_000,
        description="Tasks, conversations, files or audit events the purge deletes per "
        "transaction: short transactions that never hold up the runs' writes for long.",
    )

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

    secrets_key: SecretStr | None = Field(
        default=None,
        description="Key(s) that seal tenant secrets (AES-256-GCM): base64 of 32 bytes; several, "
        "comma-separated, during a rotation: the first seals, each opens. Required outside "
        "development; in development one is generated into the data dir.",
    )
    network_allow: CommaList = Field(
        default_factory=list,
        description="For every tenant: hosts (`api.internal`, `*.corp.example`) `http_request` "
        "may call, and CIDRs or addresses (`10.1.0.0/16`) that web and HTTP tools, MCP "
        "servers, remote agents and webhooks may reach although the SSRF guard refuses "
        "private, loopback and link-local addresses. A host name alone never opens a private "
        "address (list its network too); an address with a port (`127.0.0.1:8000`) opens that "
        "port alone, and is the only entry that opens the service's own listening port; cloud "
        "metadata endpoints stay refused.",
    )
    fetch_max_bytes: int = Field(
        default=5 * 1024 * 1024,
        ge=1024,
        description="web_fetch and http_request read at most this much of a response body.",
    )
    fetch_timeout_s: float = Field(
        default=20.0, gt=0, description="Whole web_fetch or http_request call, redirects included."
    )
    fetch_user_agent: str = Field(
        default="OmniForge/0.1 (+https://github.com/omniforge; web_fetch)",
        min_length=1,
        max_length=256,
        description="User-Agent of web_fetch and http_request.",
    )
    file_max_bytes: int = Field(
        default=20 * 1024 * 1024,
        ge=1024,
        description="Largest file an upload may store; larger ones are refused with 413.",
    )
    files_dir: Path | None = Field(
        default=None,
        description="Directory that holds uploaded files' bytes; unset: the database holds them.",
    )
    document_cpu_s: int = Field(
        default=10,
        ge=1,
        le=3600,
        description="CPU seconds reading one document (a PDF's text) may take, in a process of "
        "its own; past them an upload is refused (422 `document-refused`) and `web_fetch` fails.",
    )
    document_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Wall-clock seconds reading one document may take (its process is then "
        "killed); refused like `document_cpu_s`.",
    )
    document_memory_mb: int = Field(
        default=1024,
        ge=128,
        description="Address space of a document-reading process (MiB); a document needing more "
        "is refused (413 `document-too-large`).",
    )
    document_max_pages: int = Field(
        default=2_000,
        ge=1,
        description="Pages a document may have to be read; more: 413 `document-too-large`.",
    )
    client_errors_per_minute: int | None = Field(
        default=600,
        ge=1,
        description="Requests of one tenant a minute that may end in a client error (4xx); "
        "past them its requests are refused with 429 `rate-limited` until the window frees up. "
        "Unset: no limit.",
    )
    tenant_work_slots: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Documents one tenant may have read at once (of the `document_workers` "
        "processes); its others wait their turn, other tenants' do not wait for them.",
    )
    document_workers: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Document-reading processes kept warm; more documents wait for one.",
    )
    tool_modules: CommaList = Field(
        default_factory=list,
        description="Python modules whose BaseTool subclasses are loaded as tools besides the "
        "`omniforge.tools` entry points (comma-separated).",
    )
    mcp_timeout_s: float = Field(
        default=30.0, gt=0, description="One call to an MCP server's tool, or its discovery."
    )
    webhook_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="One webhook delivery attempt, connecting included; a receiver that has "
        "not answered by then failed the attempt.",
    )
    webhook_retry_initial_s: float = Field(
        default=5.0,
        gt=0,
        description="The wait before a failed webhook delivery's first retry; each further "
        "retry waits twice as long (up to `webhook_retry_max_s`), give or take 20 %.",
    )
    webhook_retry_max_s: float = Field(
        default=3600.0, gt=0, description="The longest wait between two webhook attempts."
    )
    webhook_retry_for_s: float = Field(
        default=86_400.0,
        gt=0,
        description="How long a webhook delivery is retried after it was stored (or "
        "redelivered by hand); an attempt failing after that marks it `failed`.",
    )
    webhook_concurrency: int = Field(
        default=8,
        ge=1,
        le=256,
        description="Webhook deliveries this process sends at once.",
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="`json`: `omniforge serve` writes one JSON object per line (uvicorn's lines "
        "included) with the request id, tenant, task and chain ids where known.",
    )
    # The standard OpenTelemetry variables, not OMNIFORGE_ ones: collectors and operators
    # already set these (an alias is read without the prefix).
    otel_exporter_otlp_endpoint: str | None = Field(
        default=None,
        validation_alias="OTEL_EXPORTER_OTLP_ENDPOINT",
        description="OTLP/HTTP base URL (e.g. http://collector:4318): each run's trace is "
        "exported to its `/v1/traces`. Unset: no tracing at all.",
    )
    otel_service_name: str = Field(
        default="omniforge",
        validation_alias="OTEL_SERVICE_NAME",
        description="`service.name` of the exported traces.",
    )

    @field_validator("network_allow", "tool_modules", "cors_origins", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

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

    @field_validator("secrets_key")
    @classmethod
    def _secrets_keys_are_well_formed(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            _secrets_keys(value.get_secret_value())
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

    @model_validator(mode="after")
    def _production_needs_a_way_to_verify_tokens(self) -> Self:
        """Outside development, tokens must be verifiable safely: a `jwt_secret` of at least
        MIN_JWT_SECRET_BYTES bytes, or a `jwt_jwks_url` alone (HS256 tokens are then refused).
        A JWKS needs `jwt_issuer` and `jwt_audience`; a secret that is set must be strong even
        beside a JWKS."""
        if self.env == "development":
            return self
        if self.jwt_jwks_url and not (self.jwt_issuer and self.jwt_audience):
            # Without them, any token the identity provider issues, for any application of
            # any of its customers, would be accepted.
            raise InsecureSettings(
                "OMNIFORGE_JWT_ISSUER and OMNIFORGE_JWT_AUDIENCE must be set with "
                "OMNIFORGE_JWT_JWKS_URL outside development"
            )
        if self.jwt_secret is None and self.jwt_jwks_url:
            return self
        secret = self.jwt_secret.get_secret_value() if self.jwt_secret else ""
        if len(secret.encode()) < MIN_JWT_SECRET_BYTES:
            raise InsecureSettings(
                "OMNIFORGE_JWT_SECRET must be set to at least "
                f"{MIN_JWT_SECRET_BYTES} bytes outside development (or left unset with "
                "OMNIFORGE_JWT_JWKS_URL, to accept only an identity provider's tokens)"
            )
        return self

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'omniforge.db').resolve()}"

    def hs256_secret(self) -> str | None:
        """The key HS256 tokens are verified with: None when production runs on the JWKS
        alone (no `jwt_secret`), so that HS256 tokens are refused; otherwise
        `resolved_jwt_secret()`."""
        if self.env != "development" and self.jwt_secret is None and self.jwt_jwks_url:
            return None
        return self.resolved_jwt_secret()

    def resolved_jwt_secret(self) -> str:
        """The HS256 key. In development with none set, one is generated once and kept in
        `data_dir`, so the server and `omniforge token` agree without configuration.
        Raises `InsecureSettings` for a secret shorter than MIN_JWT_SECRET_BYTES, and outside
        development when none is set (JWKS-only production: see `hs256_secret()`)."""
        if self.jwt_secret is not None:
            secret = self.jwt_secret.get_secret_value()
            if len(secret.encode()) < MIN_JWT_SECRET_BYTES:
                raise InsecureSettings(
                    f"OMNIFORGE_JWT_SECRET is shorter than {MIN_JWT_SECRET_BYTES} bytes"
                )
            return secret
        if self.env != "development":
            raise InsecureSettings("OMNIFORGE_JWT_SECRET is required outside development")
        return _kept_in(self.data_dir / _DEV_SECRET_FILE, lambda: secrets.token_urlsafe(48))

    def resolved_secrets_keys(self) -> list[bytes]:
        """The keys of tenant secrets, the sealing one first (each 32 bytes). In development
        with none set, one is generated once and kept in `data_dir`. Raises
        `InsecureSettings` outside development when none is set: checked here, not when the
        settings load, so that only the processes that open secrets need the key."""
        if self.secrets_key is not None:
            return _secrets_keys(self.secrets_key.get_secret_value())
        if self.env != "development":
            raise InsecureSettings(
                "OMNIFORGE_SECRETS_KEY is required outside development (base64 of 32 random "
                "bytes, e.g. `openssl rand -base64 32`)"
            )
        return _secrets_keys(_kept_in(self.data_dir / _DEV_SECRETS_KEY_FILE, _new_secrets_key))


def _new_secrets_key() -> str:
    return base64.b64encode(secrets.token_bytes(SECRETS_KEY_BYTES)).decode()


def _secrets_keys(text: str) -> list[bytes]:
    """`OMNIFORGE_SECRETS_KEY`'s keys; a `ValueError` naming the malformed one by position
    (never its value)."""
    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        raise ValueError("OMNIFORGE_SECRETS_KEY is empty")
    keys: list[bytes] = []
    for position, part in enumerate(parts, start=1):
        try:
            key = base64.b64decode(part, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(
                f"key {position} of OMNIFORGE_SECRETS_KEY is not base64 (each key is base64 of "
                f"{SECRETS_KEY_BYTES} bytes, comma-separated)"
            ) from None
        if len(key) != SECRETS_KEY_BYTES:
            raise ValueError(
                f"key {position} of OMNIFORGE_SECRETS_KEY is {len(key)} bytes, not "
                f"{SECRETS_KEY_BYTES} (e.g. `openssl rand -base64 32`)"
            )
        keys.append(key)
    return keys


def _kept_in(path: Path, make: Callable[[], str]) -> str:
    """The text kept in `path`, made by `make` the first time. Written whole to a private
    temporary file, then linked into place atomically: never readable by others, never
    half-written; of two processes starting at once, one wins and both read its text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(make())
            with contextlib.suppress(FileExistsError):
                os.link(temporary, path)
        finally:
            os.unlink(temporary)
    return path.read_text(encoding="utf-8").strip()
