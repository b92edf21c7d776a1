"""The keys of an external identity provider's JWKS: fetched on first use, cached, fetched again
for unknown `kid`s no more than once per cooldown, and kept or found unavailable when the
identity provider fails. Fetches are asserted by counting the requests the server answered;
time moves by an injected clock."""

import asyncio
import logging
import os
import socket

import jwt
import pytest

from app.security import JWKSClient
from tests.security.jwks_helpers import (
    CACHE_S,
    COOLDOWN_S,
    KEYS_UNAVAILABLE,
    UNKNOWN_KEY,
    Clock,
    JWKSServer,
    SigningKey,
    claims,
    idp,
    refusal,
    rsa_key,
    rsa_key_2,
    verifying,
)

__all__ = ["idp", "rsa_key", "rsa_key_2"]  # fixtures


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
    # A token of its own each time: a token once verified is not verified again for a while.
    first, second, third = (rsa_key.sign(claims(jti=str(n))) for n in range(3))

    async with verifying(idp.url, clock=clock, cache_s=60) as verifier:
        assert idp.requests == 0
        await verifier.verify(first)
        clock.now += 59.9
        await verifier.verify(second)
        assert idp.requests == 1
        clock.now += 0.1
        await verifier.verify(third)
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

    async with verifying(idp.url, clock=clock) as verifier:
        await verifier.verify(rsa_key.sign(claims(jti="1")))
        idp.status = 500
        clock.now += CACHE_S

        later = rsa_key.sign(claims(jti="2"))  # one not verified yet
        assert (await verifier.verify(later)).subject == "alice"  # stale keys, still used
        assert idp.requests == 2
        # A new key cannot be learnt meanwhile, and the caller is told why.
        assert await refusal(verifier, rsa_key_2.sign(claims())) == KEYS_UNAVAILABLE
        assert idp.requests == 2
