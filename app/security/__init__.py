"""Who is calling: JWT verification and the principal every query is scoped by."""

from typing import TYPE_CHECKING, Any

from app.security.principal import Principal
from app.security.tokens import AuthenticationFailed, TokenVerifier, mint_token

if TYPE_CHECKING:
    from app.security.jwks import JWKSClient


def __getattr__(name: str) -> Any:
    # The identity providers' key client imports httpx and cryptography (a tenth of a second):
    # only a service with an identity provider, or code naming it, imports it.
    if name == "JWKSClient":
        from app.security.jwks import JWKSClient

        return JWKSClient
    raise AttributeError(f"module 'app.security' has no attribute {name!r}")


__all__ = ["AuthenticationFailed", "JWKSClient", "Principal", "TokenVerifier", "mint_token"]
