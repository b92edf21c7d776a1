"""Who is calling: JWT verification and the principal every query is scoped by."""

from app.security.jwks import JWKSClient
from app.security.principal import Principal
from app.security.tokens import AuthenticationFailed, TokenVerifier, mint_token

__all__ = ["AuthenticationFailed", "JWKSClient", "Principal", "TokenVerifier", "mint_token"]
