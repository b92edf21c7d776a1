"""The signing keys of an external identity provider, fetched from its JWKS URL and cached."""

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric.ec import (
    SECP256R1,
    SECP384R1,
    SECP521R1,
    EllipticCurve,
    EllipticCurvePublicKey,
)
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from app.security.tokens import AuthenticationFailed

logger = logging.getLogger(__name__)

KEYS_UNAVAILABLE = "the identity provider's keys are unavailable"
UNKNOWN_KEY = "the token's signing key is unknown"
ALGORITHM_NOT_ACCEPTED = "the token's algorithm is not accepted"

# The public key a JWKS entry must hold to verify each algorithm: the type, and for EC the
# curve. Checked before PyJWT sees the key, so that a key is never used with an algorithm
# it was not published for (an RSA key for ES256, a P-384 key for ES256...).
_CURVES: dict[str, type[EllipticCurve]] = {
    "ES256": SECP256R1,
    "ES384": SECP384R1,
    "ES512": SECP521R1,
}
_RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})


class JWKSClient:
    """The keys published at `url`, as `jwt.PyJWK`s chosen by `kid` and algorithm.

    Nothing is fetched before the first `key()` call. The keys are then used for `cache_s`
    and fetched again on the next call after that. A `kid` missing from them causes one
    refetch, at most once per `refresh_cooldown_s` (forged tokens with random `kid`s must
    not turn into requests to the identity provider); a failed fetch is not retried within
    `refresh_cooldown_s` either. Concurrent callers share one fetch. A failed fetch is
    logged and keeps the last good keys, which stay in use until a fetch succeeds.

    A key is used only with the algorithm it is bound to: its `alg` when published, else
    PyJWT's default for its type (RS256 for RSA; ES256/ES384/ES512 by curve). Keys whose
    `use` is not `sig` are ignored.

    `client` is used as is and left open; without one, the client's own is created on first
    use and closed by `aclose()`. `clock` (monotonic seconds) is injectable for tests.
    """

    ALGORITHMS = _RSA_ALGORITHMS | frozenset(_CURVES)
    """The algorithms keys can be chosen for."""

    def __init__(
        self,
        url: str,
        *,
        cache_s: float,
        refresh_cooldown_s: float,
        timeout_s: float = 5.0,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if httpx.URL(url).scheme not in {"http", "https"}:
            raise ValueError(f"the JWKS URL must be http(s): {url!r}")
        if cache_s <= 0 or refresh_cooldown_s < 0 or timeout_s <= 0:
            raise ValueError("cache_s and timeout_s must be positive, refresh_cooldown_s >= 0")
        self._url = url
        self._cache_s = cache_s
        self._cooldown_s = refresh_cooldown_s
        self._timeout_s = timeout_s
        self._client = client
        self._owns_client = client is None
        self._clock = clock
        self._lock = asyncio.Lock()
        self._keys: tuple[jwt.PyJWK, ...] = ()
        self._fetched_at: float | None = None  # of the keys in use
        self._failed_at: float | None = None  # of the last fetch, if it failed
        self._refetched_at: float | None = None  # last refetch for an unknown `kid`

    async def key(self, kid: str | None, *, algorithm: str) -> jwt.PyJWK:
        """The key named `kid` if it fits `algorithm`; with no `kid`, the only key fitting
        `algorithm`. Raises `AuthenticationFailed`: the keys are unavailable (never fetched
        successfully, or the refetch for an unknown `kid` failed), the key is unknown (or,
        without `kid`, not exactly one key fits), or the named key does not fit `algorithm`.
        """
        if self._stale():
            await self._fetch_unless(lambda: not self._stale())
        if not self._keys:
            raise AuthenticationFailed(KEYS_UNAVAILABLE)
        if kid is None:
            fitting = [key for key in self._keys if _fits(key, algorithm)]
            if len(fitting) != 1:
                raise AuthenticationFailed(UNKNOWN_KEY)
            return fitting[0]
        if not self._knows(kid):
            await self._fetch_unless(lambda: self._knows(kid), unknown_kid=True)
            if not self._knows(kid):
                failed = self._failed_at is not None
                raise AuthenticationFailed(KEYS_UNAVAILABLE if failed else UNKNOWN_KEY)
        named = [key for key in self._keys if key.key_id == kid]
        # Two keys under one `kid` would be the provider's mistake; the first fitting wins.
        for key in named:
            if _fits(key, algorithm):
                return key
        raise AuthenticationFailed(ALGORITHM_NOT_ACCEPTED)

    async def aclose(self) -> None:
        """Closes the HTTP client if this object created it."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    def _stale(self) -> bool:
        return self._fetched_at is None or self._clock() - self._fetched_at >= self._cache_s

    def _knows(self, kid: str) -> bool:
        return any(key.key_id == kid for key in self._keys)

    def _cooling_down(self, since: float | None, now: float) -> bool:
        return since is not None and now - since < self._cooldown_s

    async def _fetch_unless(
        self, satisfied: Callable[[], bool], *, unknown_kid: bool = False
    ) -> None:
        async with self._lock:
            # Whoever held the lock before may have fetched what this caller needs, or failed
            # to moments ago; either way this caller does not fetch again.
            now = self._clock()
            if satisfied() or self._cooling_down(self._failed_at, now):
                return
            if unknown_kid and self._cooling_down(self._refetched_at, now):
                return
            await self._fetch(now)
            if unknown_kid:
                self._refetched_at = now

    async def _fetch(self, now: float) -> None:
        if self._client is None:
            self._client = httpx.AsyncClient()
        try:
            response = await self._client.get(
                self._url, timeout=self._timeout_s, headers={"Accept": "application/json"}
            )
            if response.status_code != httpx.codes.OK:
                raise ValueError(f"HTTP {response.status_code}")
            keys = _parse(response.json())
        except (httpx.HTTPError, httpx.InvalidURL, ValueError, jwt.PyJWTError) as exc:
            self._failed_at = now
            logger.warning(
                "JWKS fetch from %s failed (%s: %s); %s",
                self._url,
                type(exc).__name__,
                exc,
                "keeping the previous keys" if self._keys else "no keys to verify tokens with",
            )
            return
        self._keys, self._fetched_at, self._failed_at = keys, now, None
        logger.info("JWKS fetched from %s: %d usable keys", self._url, len(keys))


def _parse(document: Any) -> tuple[jwt.PyJWK, ...]:
    if not isinstance(document, dict):
        raise ValueError("the JWKS is not a JSON object")
    # PyJWKSet skips the keys PyJWT cannot use and refuses a set left empty.
    return tuple(jwt.PyJWKSet.from_dict(document).keys)


def _fits(key: jwt.PyJWK, algorithm: str) -> bool:
    if key.algorithm_name != algorithm or key.public_key_use not in {None, "sig"}:
        return False
    public_key = key.key
    curve = _CURVES.get(algorithm)
    if curve is None:
        return algorithm in _RSA_ALGORITHMS and isinstance(public_key, RSAPublicKey)
    return isinstance(public_key, EllipticCurvePublicKey) and isinstance(public_key.curve, curve)
