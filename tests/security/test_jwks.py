"""Tokens of an external identity provider: its keys served as a JWKS by a real HTTP server on
127.0.0.1, fetched on first use, cached, fetched again for unknown `kid`s no more than once per
cooldown, and each used only with the algorithm it is published for. Fetches are asserted by
counting the requests the server answered; time moves by an injected clock."""

import asyncio
import hashlib
import hmac
import json
import logging
import os
import socket
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from app.config import Settings
from app.security import AuthenticationFailed, JWKSClient, Principal, TokenVerifier, mint_token

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


def hand_made_hs256(key: bytes, payload: dict[str, Any], **header: Any) -> str:
    """An HS256 token signed with `key`, put together by hand: PyJWT refuses to sign with an
    empty key or with a PEM public key, which is what attackers do."""

    def segment(data: dict[str, Any]) -> str:
        return jwt.utils.base64url_encode(json.dumps(data).encode()).decode()

    signing_input = f"{segment({'alg': 'HS256', 'typ': 'JWT', **header})}.{segment(payload)}"
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{jwt.utils.base64url_encode(signature).decode()}"


async def refusal(verifier: TokenVerifier, token: str) -> str:
    with pytest.raises(AuthenticationFailed) as refused:
        await verifier.verify(token)
    assert refused.value.token_given
    return refused.value.reason


# Tokens that verify.


async def test_an_rs256_token_verifies_with_keycloak_style_nested_roles(
    idp: JWKSServer, rsa_key: SigningKey
) -> None:
    idp.publish(rsa_key)
    token = rsa_key.sign(
        claims(roles=None, realm_access={"roles": ["admin", "member"]}, azp="omniforge")
    )

    async with verifying(idp.url, roles_claim="realm_access.roles") as verifier:
        principal = await verifier.verify(token)

    assert principal == Principal(
        subject="alice", tenant_id="acme", roles=frozenset({"admin", "member"})
    )
    assert idp.requests == 1


async def test_an_rs256_token_verifies_with_an_auth0_style_namespaced_tenant_claim(
    idp: JWKSServer, rsa_key: SigningKey
) -> None:
    idp.publish(rsa_key)
    namespace = "https://omniforge.example.com/"
    token = rsa_key.sign(
        claims(
            tenant_id=None,
            roles=None,
            aud=[AUDIENCE, "https://idp.example.com/userinfo"],
            **{f"{namespace}tenant": "globex", f"{namespace}roles": "viewer member"},
        )
    )

    async with verifying(
        idp.url, tenant_claim=f"{namespace}tenant", roles_claim=f"{namespace}roles"
    ) as verifier:
        principal = await verifier.verify(token)

    assert principal == Principal(
        subject="alice", tenant_id="globex", roles=frozenset({"viewer", "member"})
    )


async def test_an_es256_token_verifies(
    idp: JWKSServer, rsa_key: SigningKey, ec_key: SigningKey
) -> None:
    idp.publish(rsa_key, ec_key)

    async with verifying(idp.url) as verifier:
        principal = await verifier.verify(ec_key.sign(claims()))

    assert principal == Principal(subject="alice", tenant_id="acme", roles=frozenset({"member"}))


async def test_hs256_tokens_still_verify_beside_the_jwks_without_fetching_it(
    idp: JWKSServer,
) -> None:
    token = mint_token(
        SECRET,
        tenant_id="acme",
        subject="alice",
        roles=["member"],
        issuer=ISSUER,
        audience=AUDIENCE,
    )

    async with verifying(idp.url) as verifier:
        assert (await verifier.verify(token)).tenant_id == "acme"

    assert idp.requests == 0


@pytest.mark.parametrize("beside", ["an-ec-key", "another-rsa-key"])
async def test_a_token_without_kid_is_verified_only_by_the_one_key_fitting_its_algorithm(
    beside: str, idp: JWKSServer, rsa_key: SigningKey, rsa_key_2: SigningKey, ec_key: SigningKey
) -> None:
    idp.publish(rsa_key, ec_key if beside == "an-ec-key" else rsa_key_2)
    token = jwt.encode(claims(), rsa_key.private, algorithm="RS256")

    async with verifying(idp.url) as verifier:
        if beside == "an-ec-key":
            assert (await verifier.verify(token)).subject == "alice"
        else:
            assert await refusal(verifier, token) == UNKNOWN_KEY


# Tokens refused.


async def test_an_alg_none_token_is_refused(idp: JWKSServer, rsa_key: SigningKey) -> None:
    idp.publish(rsa_key)
    token = jwt.encode(claims(), None, algorithm="none", headers={"kid": rsa_key.kid})

    async with verifying(idp.url) as verifier:
        assert await refusal(verifier, token) == NOT_ACCEPTED


@pytest.mark.parametrize("hmac_key", ["public-key-pem", "empty"])
@pytest.mark.parametrize(
    ("secret", "reason"),
    [(SECRET, "the token's signature is invalid"), (None, NOT_ACCEPTED)],
    ids=["with-secret", "jwks-only"],
)
async def test_hs256_signed_with_the_public_key_pem_or_an_empty_secret_is_refused(
    hmac_key: str, secret: str | None, reason: str, idp: JWKSServer, rsa_key: SigningKey
) -> None:
    idp.publish(rsa_key)
    pem = rsa_key.private.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    key = pem if hmac_key == "public-key-pem" else b""
    token = hand_made_hs256(key, claims(), kid=rsa_key.kid)

    async with verifying(idp.url, secret=secret) as verifier:
        assert await refusal(verifier, token) == reason
    assert idp.requests == 0  # HS256 never looks at the JWKS


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"exp": -3600, "iat": -7200, "nbf": -7200}, "the token has expired"),
        ({"nbf": 300, "iat": 300}, "the token is not valid yet"),
        ({"exp": None}, "the token has no `exp` claim"),
        ({"iss": "https://evil.example.com/"}, "the token's issuer is not accepted"),
        ({"iss": None}, "the token has no `iss` claim"),
        ({"aud": "another-app"}, "the token's audience is not accepted"),
        ({"aud": ["another-app", "a-third-app"]}, "the token's audience is not accepted"),
        ({"aud": None}, "the token has no `aud` claim"),
    ],
    ids=[
        "expired",
        "not-valid-yet",
        "no-exp",
        "wrong-issuer",
        "no-issuer",
        "wrong-audience",
        "wrong-audiences",
        "no-audience",
    ],
)
async def test_a_token_out_of_its_time_issuer_or_audience_is_refused(
    overrides: dict[str, Any], reason: str, idp: JWKSServer, rsa_key: SigningKey
) -> None:
    idp.publish(rsa_key)
    now = int(datetime.now(UTC).timestamp())
    for name in ("exp", "nbf", "iat"):  # given relative to now
        if overrides.get(name) is not None:
            overrides = {**overrides, name: now + overrides[name]}

    async with verifying(idp.url) as verifier:
        assert await refusal(verifier, rsa_key.sign(claims(**overrides))) == reason


async def test_without_a_configured_audience_the_audience_is_not_checked(
    idp: JWKSServer, rsa_key: SigningKey
) -> None:
    idp.publish(rsa_key)

    async with verifying(idp.url, audience=None) as verifier:
        assert (await verifier.verify(rsa_key.sign(claims(aud="any-app")))).subject == "alice"


async def test_a_token_signed_by_another_key_under_a_known_kid_is_refused(
    idp: JWKSServer, rsa_key: SigningKey, rsa_key_2: SigningKey
) -> None:
    idp.publish(rsa_key)
    forged = jwt.encode(claims(), rsa_key_2.private, algorithm="RS256", headers={"kid": "rsa-1"})

    async with verifying(idp.url) as verifier:
        assert await refusal(verifier, forged) == "the token's signature is invalid"


@pytest.mark.parametrize(
    ("algorithm", "kid"),
    [("RS256", "ec-1"), ("ES256", "rsa-1")],
    ids=["rs256-naming-an-ec-key", "es256-naming-an-rsa-key"],
)
async def test_a_token_naming_a_key_of_another_type_is_refused(
    algorithm: str, kid: str, idp: JWKSServer, rsa_key: SigningKey, ec_key: SigningKey
) -> None:
    idp.publish(rsa_key, ec_key)
    signer = rsa_key if algorithm == "RS256" else ec_key
    token = jwt.encode(claims(), signer.private, algorithm=algorithm, headers={"kid": kid})

    async with verifying(idp.url) as verifier:
        assert await refusal(verifier, token) == NOT_ACCEPTED


async def test_a_key_published_for_another_algorithm_or_use_is_not_used(
    idp: JWKSServer, rsa_key: SigningKey, rsa_key_2: SigningKey
) -> None:
    idp.document = {"keys": [rsa_key.jwk(alg="RS512"), rsa_key_2.jwk(use="enc")]}

    async with verifying(idp.url) as verifier:
        assert await refusal(verifier, rsa_key.sign(claims())) == NOT_ACCEPTED
        assert await refusal(verifier, rsa_key_2.sign(claims())) == NOT_ACCEPTED


async def test_an_algorithm_not_configured_is_refused_without_fetching_keys(
    idp: JWKSServer, ec_key: SigningKey
) -> None:
    idp.publish(ec_key)

    async with verifying(idp.url, algorithms=["RS256"]) as verifier:
        assert await refusal(verifier, ec_key.sign(claims())) == NOT_ACCEPTED

    assert idp.requests == 0


async def test_an_rsa_key_shorter_than_2048_bits_is_refused(idp: JWKSServer) -> None:
    weak = SigningKey("weak", "RS256", rsa.generate_private_key(65537, 1024))
    idp.publish(weak)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jwt.warnings.InsecureKeyLengthWarning)
        token = weak.sign(claims())

    async with verifying(idp.url) as verifier:
        assert await refusal(verifier, token) == "the token's signing key is not accepted"


# Fetching and caching the keys.


@pytest.mark.parametrize(
    ("url", "cache_s", "message"),
    [("file:///etc/jwks.json", 60, "must be http"), ("http://127.0.0.1:9/jwks", 0, "positive")],
)
def test_a_jwks_client_needs_an_http_url_and_a_positive_cache_time(
    url: str, cache_s: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        JWKSClient(url, cache_s=cache_s, refresh_cooldown_s=0)


async def test_concurrent_first_uses_share_one_fetch(idp: JWKSServer, rsa_key: SigningKey) -> None:
    idp.publish(rsa_key)

    async with verifying(idp.url) as verifier:
        principals = await asyncio.gather(
            *(verifier.verify(rsa_key.sign(claims(sub=f"user-{n}"))) for n in range(20))
        )

    assert {principal.subject for principal in principals} == {f"user-{n}" for n in range(20)}
    assert idp.requests == 1


async def test_keys_are_fetched_on_first_use_and_again_once_older_than_cache_s(
    idp: JWKSServer, rsa_key: SigningKey
) -> None:
    idp.publish(rsa_key)
    clock = Clock()
    token = rsa_key.sign(claims())

    async with verifying(idp.url, clock=clock, cache_s=60) as verifier:
        assert idp.requests == 0
        await verifier.verify(token)
        clock.now += 59.9
        await verifier.verify(token)
        assert idp.requests == 1
        clock.now += 0.1
        await verifier.verify(token)
        assert idp.requests == 2


async def test_an_unknown_kid_causes_one_refetch_and_no_more_within_the_cooldown(
    idp: JWKSServer, rsa_key: SigningKey, rsa_key_2: SigningKey
) -> None:
    idp.publish(rsa_key)
    clock = Clock()

    def unknown(kid: str) -> str:
        return jwt.encode(claims(), rsa_key_2.private, algorithm="RS256", headers={"kid": kid})

    async with verifying(idp.url, clock=clock) as verifier:
        await verifier.verify(rsa_key.sign(claims()))
        assert idp.requests == 1

        assert await refusal(verifier, unknown("first-unknown")) == UNKNOWN_KEY
        assert idp.requests == 2  # one refetch
        assert await refusal(verifier, unknown("second-unknown")) == UNKNOWN_KEY
        assert idp.requests == 2  # within the cooldown: none

        clock.now += COOLDOWN_S
        assert await refusal(verifier, unknown("third-unknown")) == UNKNOWN_KEY
        assert idp.requests == 3


async def test_a_flood_of_unknown_kids_causes_one_refetch(
    idp: JWKSServer, rsa_key: SigningKey
) -> None:
    idp.publish(rsa_key)
    forged = [
        jwt.encode(
            claims(), rsa_key.private, algorithm="RS256", headers={"kid": os.urandom(8).hex()}
        )
        for _ in range(50)
    ]

    async with verifying(idp.url) as verifier:
        outcomes = await asyncio.gather(
            *(verifier.verify(token) for token in forged), return_exceptions=True
        )

    assert [getattr(outcome, "reason", outcome) for outcome in outcomes] == [UNKNOWN_KEY] * 50
    assert idp.requests == 2  # the first fetch, then one refetch for all 50


async def test_a_rotated_key_verifies_after_one_refetch(
    idp: JWKSServer, rsa_key: SigningKey, rsa_key_2: SigningKey
) -> None:
    idp.publish(rsa_key)

    async with verifying(idp.url) as verifier:
        await verifier.verify(rsa_key.sign(claims()))
        idp.publish(rsa_key_2)  # the identity provider rotates its key

        principal = await verifier.verify(rsa_key_2.sign(claims(sub="bob")))

    assert principal.subject == "bob"
    assert idp.requests == 2


# The identity provider failing.


async def test_an_unreachable_identity_provider_leaves_its_keys_unavailable(
    rsa_key: SigningKey, caplog: pytest.LogCaptureFixture
) -> None:
    # A bound socket that never listens: connections are refused, and no one else can take
    # the port meanwhile.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/jwks"

        async with verifying(url) as verifier:
            with caplog.at_level(logging.WARNING, logger="app.security.jwks"):
                assert await refusal(verifier, rsa_key.sign(claims())) == KEYS_UNAVAILABLE

    assert any(
        url in record.getMessage() and "ConnectError" in record.getMessage()
        for record in caplog.records
    )


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (503, None),
        (200, b"<html>not json</html>"),
        (200, b"[]"),
        (200, b'{"keys": []}'),
        (200, b'{"keys": [{"kty": "RSA", "kid": "broken"}]}'),
    ],
    ids=["http-503", "not-json", "not-an-object", "no-keys", "no-usable-key"],
)
async def test_a_failing_jwks_endpoint_leaves_the_keys_unavailable(
    status: int, body: bytes | None, idp: JWKSServer, rsa_key: SigningKey
) -> None:
    idp.publish(rsa_key)
    idp.status, idp.body = status, body

    async with verifying(idp.url) as verifier:
        assert await refusal(verifier, rsa_key.sign(claims())) == KEYS_UNAVAILABLE

    assert idp.requests == 1


async def test_a_failed_fetch_is_not_retried_within_the_cooldown(
    idp: JWKSServer, rsa_key: SigningKey
) -> None:
    idp.publish(rsa_key)
    idp.status = 503
    clock = Clock()
    token = rsa_key.sign(claims())

    async with verifying(idp.url, clock=clock) as verifier:
        for _ in range(3):
            assert await refusal(verifier, token) == KEYS_UNAVAILABLE
        assert idp.requests == 1

        clock.now += COOLDOWN_S
        idp.status = 200
        assert (await verifier.verify(token)).subject == "alice"
        assert idp.requests == 2


async def test_the_last_good_keys_are_kept_when_a_refetch_fails(
    idp: JWKSServer, rsa_key: SigningKey, rsa_key_2: SigningKey
) -> None:
    idp.publish(rsa_key)
    clock = Clock()
    token = rsa_key.sign(claims())

    async with verifying(idp.url, clock=clock) as verifier:
        await verifier.verify(token)
        idp.status = 500
        clock.now += CACHE_S

        assert (await verifier.verify(token)).subject == "alice"  # stale keys, still used
        assert idp.requests == 2
        # A new key cannot be learnt meanwhile, and the caller is told why.
        assert await refusal(verifier, rsa_key_2.sign(claims())) == KEYS_UNAVAILABLE
        assert idp.requests == 2


# Built from the settings.


async def test_from_settings_checks_the_configured_issuer_audience_and_claims(
    idp: JWKSServer, rsa_key: SigningKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("OMNIFORGE_"):
            monkeypatch.delenv(name)
    idp.publish(rsa_key)
    settings = Settings(
        env="production",
        jwt_jwks_url=idp.url,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        jwt_roles_claim="realm_access.roles",
    )
    token = rsa_key.sign(claims(roles=None, realm_access={"roles": ["a"]}))

    verifier = TokenVerifier.from_settings(settings)
    try:
        assert idp.requests == 0
        assert (await verifier.verify(token)).roles == frozenset({"a"})
        for wrong, reason in [
            ({"iss": "https://evil.example.com/"}, "the token's issuer is not accepted"),
            ({"aud": "another-app"}, "the token's audience is not accepted"),
        ]:
            assert await refusal(verifier, rsa_key.sign(claims(**wrong))) == reason
    finally:
        await verifier.aclose()
