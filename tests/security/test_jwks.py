"""Tokens of an external identity provider, verified with the keys of its JWKS: which verify,
and which are refused (each key used only with the algorithm it is published for); and the
verifier built from the settings. Fetching and caching the keys: test_jwks_fetching.py."""

import hashlib
import hmac
import json
import os
import warnings
from datetime import UTC, datetime
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from app.config import Settings
from app.security import Principal, TokenVerifier, mint_token
from tests.security.jwks_helpers import (
    AUDIENCE,
    ISSUER,
    NOT_ACCEPTED,
    SECRET,
    UNKNOWN_KEY,
    JWKSServer,
    SigningKey,
    claims,
    ec_key,
    idp,
    refusal,
    rsa_key,
    rsa_key_2,
    verifying,
)

# The fixtures this module uses, imported by name.
__all__ = ["ec_key", "idp", "rsa_key", "rsa_key_2"]


def hand_made_hs256(key: bytes, payload: dict[str, Any], **header: Any) -> str:
    """An HS256 token signed with `key`, put together by hand: PyJWT refuses to sign with an
    empty key or with a PEM public key, which is what attackers do."""

    def segment(data: dict[str, Any]) -> str:
        return jwt.utils.base64url_encode(json.dumps(data).encode()).decode()

    signing_input = f"{segment({'alg': 'HS256', 'typ': 'JWT', **header})}.{segment(payload)}"
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{jwt.utils.base64url_encode(signature).decode()}"


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
    token = jwt.encode(claims(), "", algorithm="none", headers={"kid": rsa_key.kid})

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
