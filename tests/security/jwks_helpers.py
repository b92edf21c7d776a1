"""An external identity provider for the JWKS tests (test_jwks*.py) and the suites that sign in
through one: its keys served as a JWKS by a real HTTP server on 127.0.0.1 that counts the
requests it answers, and a verifier over it whose time moves by an injected clock."""

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from app.security import AuthenticationFailed, JWKSClient, TokenVerifier

ISSUER = "https://idp.example.com/realms/acme"
AUDIENCE = "omniforge"
SECRET = "jwks-test-secret-" + "s" * 40
COOLDOWN_S = 30.0
CACHE_S = 3600.0

KEYS_UNAVAILABLE = "the identity provider's keys are unavailable"
UNKNOWN_KEY = "the token's signing key is unknown"
NOT_ACCEPTED = "the token's algorithm is not accepted"


@dataclass(frozen=True)
class SigningKey:
    """A key of the identity provider: signs tokens, and is published as a JWK."""

    kid: str
    algorithm: str
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

    def jwk(self, **members: Any) -> dict[str, Any]:
        public = self.private.public_key()
        if isinstance(public, rsa.RSAPublicKey):
            jwk = RSAAlgorithm.to_jwk(public, as_dict=True)
        else:
            jwk = ECAlgorithm.to_jwk(public, as_dict=True)
        return {**jwk, "kid": self.kid, "alg": self.algorithm, "use": "sig", **members}

    def sign(self, claims: dict[str, Any], **header: Any) -> str:
        headers = {"kid": self.kid, **header}
        return jwt.encode(claims, self.private, algorithm=self.algorithm, headers=headers)


@pytest.fixture(scope="session")
def rsa_key() -> SigningKey:
    return SigningKey("rsa-1", "RS256", rsa.generate_private_key(65537, 2048))


@pytest.fixture(scope="session")
def rsa_key_2() -> SigningKey:
    """Another RSA key: a rotated one, or a forger's."""
    return SigningKey("rsa-2", "RS256", rsa.generate_private_key(65537, 2048))


@pytest.fixture(scope="session")
def ec_key() -> SigningKey:
    return SigningKey("ec-1", "ES256", ec.generate_private_key(ec.SECP256R1()))


@dataclass
class JWKSServer:
    """Serves `document` (or `body`, raw) with `status` at `url`; counts the requests."""

    url: str = ""
    document: dict[str, Any] = field(default_factory=lambda: {"keys": []})
    status: int = 200
    body: bytes | None = None
    requests: int = 0

    def publish(self, *keys: SigningKey) -> None:
        self.document = {"keys": [key.jwk() for key in keys]}

    async def handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        if self.body is not None:
            return web.Response(status=self.status, body=self.body)
        return web.json_response(self.document, status=self.status)


@pytest.fixture
async def idp() -> AsyncIterator[JWKSServer]:
    server = JWKSServer()
    app = web.Application()
    app.router.add_get("/jwks", server.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        server.url = f"http://127.0.0.1:{port}/jwks"
        yield server
    finally:
        await runner.cleanup()


class Clock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def verifying(
    url: str,
    *,
    secret: str | None = SECRET,
    clock: Callable[[], float] | None = None,
    cache_s: float = CACHE_S,
    **options: Any,
) -> AsyncIterator[TokenVerifier]:
    """A verifier with `secret` and the JWKS at `url`, checking ISSUER and AUDIENCE."""
    jwks = JWKSClient(url, cache_s=cache_s, refresh_cooldown_s=COOLDOWN_S, clock=clock or Clock())
    verifier = TokenVerifier(
        secret, jwks=jwks, **{"issuer": ISSUER, "audience": AUDIENCE, **options}
    )
    try:
        yield verifier
    finally:
        await verifier.aclose()


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(datetime.now(UTC).timestamp())
    values: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice",
        "tenant_id": "acme",
        "roles": ["member"],
        "iat": now,
        "nbf": now,
        "exp": now + 600,
    }
    values.update(overrides)
    return {name: value for name, value in values.items() if value is not None}


async def refusal(verifier: TokenVerifier, token: str) -> str:
    with pytest.raises(AuthenticationFailed) as refused:
        await verifier.verify(token)
    assert refused.value.token_given
    return refused.value.reason
