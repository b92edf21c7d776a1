"""Who is calling: JWT verification and the principal every query is scoped by."""

from typing import TYPE_CHECKING

from app.lazy import lazy_attributes
from app.security.principal import Principal
from app.security.tokens import AuthenticationFailed, TokenVerifier, mint_token

if TYPE_CHECKING:
    from app.security.jwks import JWKSClient


# The identity providers' key client imports httpx and cryptography (a tenth of a second):
# only a service with an identity provider, or code naming it, imports it.
__getattr__ = lazy_attributes(__name__, {"JWKSClient": "app.security.jwks"})


__all__ = ["AuthenticationFailed", "JWKSClient", "Principal", "TokenVerifier", "mint_token"]
