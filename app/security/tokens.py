"""Bearer JWTs: verified with PyJWT against an explicit algorithm allow-list."""

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt

from app.security.principal import Principal

HS256 = "HS256"
_REQUIRED_CLAIMS = ["exp", "sub", "tenant_id"]
_MAX_ID_CHARS = {"sub": 255, "tenant_id": 64}


class AuthenticationFailed(Exception):
    """The request carries no usable credentials; `reason` is safe to show the caller."""

    def __init__(self, reason: str, *, token_given: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.token_given = token_given


class TokenVerifier:
    """Verifies HS256 tokens: signature, `exp` (required), `nbf`/`iat` when present, and the
    `sub`, `tenant_id` and `roles` claims. Never trusts the token's own `alg` header."""

    def __init__(self, secret: str, *, leeway_s: float = 30.0) -> None:
        if not secret:
            raise ValueError("an empty JWT secret verifies nothing")
        self._secret = secret
        self._leeway = timedelta(seconds=leeway_s)

    def verify(self, token: str) -> Principal:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                self._secret,
                algorithms=[HS256],
                leeway=self._leeway,
                options={"require": _REQUIRED_CLAIMS},
            )
        except jwt.ExpiredSignatureError as exc:
            raise AuthenticationFailed("the token has expired") from exc
        except jwt.ImmatureSignatureError as exc:
            raise AuthenticationFailed("the token is not valid yet") from exc
        except jwt.InvalidSignatureError as exc:
            raise AuthenticationFailed("the token's signature is invalid") from exc
        except jwt.MissingRequiredClaimError as exc:
            raise AuthenticationFailed(f"the token has no `{exc.claim}` claim") from exc
        except jwt.InvalidAlgorithmError as exc:
            raise AuthenticationFailed("the token's algorithm is not accepted") from exc
        except jwt.InvalidTokenError as exc:
            raise AuthenticationFailed("the token is malformed") from exc
        return _principal(claims)


def _principal(claims: dict[str, Any]) -> Principal:
    for name, limit in _MAX_ID_CHARS.items():
        value = claims.get(name)
        if not isinstance(value, str) or not value or len(value) > limit:
            raise AuthenticationFailed(f"the token's `{name}` claim must be a non-empty string")
    roles = claims.get("roles", [])
    if isinstance(roles, str):
        roles = roles.split()
    if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
        raise AuthenticationFailed("the token's `roles` claim must be a list of strings")
    return Principal(subject=claims["sub"], tenant_id=claims["tenant_id"], roles=frozenset(roles))


def mint_token(
    secret: str,
    *,
    tenant_id: str,
    subject: str,
    roles: Sequence[str],
    ttl: timedelta = timedelta(hours=1),
    now: datetime | None = None,
) -> str:
    """An HS256 token for local use and tests."""
    issued = now or datetime.now(UTC)
    claims = {
        "sub": subject,
        "tenant_id": tenant_id,
        "roles": list(roles),
        "iat": issued,
        "nbf": issued,
        "exp": issued + ttl,
    }
    return jwt.encode(claims, secret, algorithm=HS256)
