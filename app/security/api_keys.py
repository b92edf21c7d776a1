"""API key secrets: `omf_` and 43 URL-safe characters (256 random bits). A key is found by
the SHA-256 of its whole secret; its first 12 characters (`omf_` and 8 more, 48 bits) are its
public prefix, shown in listings and audit rows and never enough to use it."""

import hashlib
import re
import secrets

KEY_PREFIX = "omf_"
PUBLIC_CHARS = 12
_KEY = re.compile(r"omf_[A-Za-z0-9_-]{43}")


def new_api_key() -> tuple[str, str]:
    """A new secret and its public prefix."""
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    return secret, secret[:PUBLIC_CHARS]


def is_api_key(token: str) -> bool:
    """Whether a bearer token is meant as an API key (not a JWT)."""
    return token.startswith(KEY_PREFIX)


def well_formed(token: str) -> bool:
    return _KEY.fullmatch(token) is not None


def secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def key_subject(prefix: str) -> str:
    """Who a key acts as: its tasks' owner and its audit rows' actor."""
    return f"api-key:{prefix}"
