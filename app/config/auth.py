"""How tokens are verified: the HS256 secret, an identity provider's JWKS, and the claims
that name a caller's tenant and roles."""

import secrets
from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator

from app.config.deployment import DeploymentSettings, InsecureSettings
from app.config.values import kept_in

MIN_JWT_SECRET_BYTES = 32
_DEV_SECRET_FILE = "jwt-secret"


class AuthSettings(DeploymentSettings):
    """Token verification; outside development, refused unless tokens are verified safely."""

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
        return kept_in(self.data_dir / _DEV_SECRET_FILE, lambda: secrets.token_urlsafe(48))
