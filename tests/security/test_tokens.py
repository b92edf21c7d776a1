"""Bearer token verification on the HS256 path (tokens of an identity provider: test_jwks.py):
the algorithm allow-list, required claims, leeway, claim names and the claims' shapes."""

import hashlib
import hmac
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from app.security import AuthenticationFailed, JWKSClient, Principal, TokenVerifier, mint_token

SECRET = "unit-test-secret-" + "s" * 60  # long enough for HS512 too


def _claims(**overrides: Any) -> dict[str, Any]:
    now = datetime.now(UTC)
    claims: dict[str, Any] = {
        "sub": "alice",
        "tenant_id": "acme",
        "roles": ["member"],
        "iat": now,
        "nbf": now,
        "exp": now + timedelta(minutes=10),
    }
    claims.update(overrides)
    return {name: value for name, value in claims.items() if value is not None}


def _in(seconds: int) -> int:
    return int(datetime.now(UTC).timestamp()) + seconds


def _hs256(**overrides: Any) -> str:
    return jwt.encode(_claims(**overrides), SECRET, algorithm="HS256")


async def _refusal(token: str, verifier: TokenVerifier | None = None) -> str:
    with pytest.raises(AuthenticationFailed) as refused:
        await (verifier or TokenVerifier(SECRET)).verify(token)
    assert refused.value.token_given
    return refused.value.reason


async def test_a_minted_token_verifies_to_its_principal() -> None:
    token = mint_token(SECRET, tenant_id="acme", subject="alice", roles=["member", "viewer"])

    principal = await TokenVerifier(SECRET).verify(token)

    assert principal == Principal(
        subject="alice", tenant_id="acme", roles=frozenset({"member", "viewer"})
    )


def test_mint_token_signs_hs256_with_iat_nbf_and_exp_from_its_ttl() -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    token = mint_token(
        SECRET, tenant_id="acme", subject="alice", roles=[], ttl=timedelta(minutes=5), now=now
    )

    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    claims = jwt.decode(token, SECRET, algorithms=["HS256"])
    assert claims == {
        "sub": "alice",
        "tenant_id": "acme",
        "roles": [],
        "iat": int(now.timestamp()),
        "nbf": int(now.timestamp()),
        "exp": int(now.timestamp()) + 300,
    }


def test_an_empty_secret_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="empty"):
        TokenVerifier("")


def test_a_verifier_without_secret_or_jwks_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="a JWT secret, a JWKS or both"):
        TokenVerifier(None)


@pytest.mark.parametrize("algorithm", ["HS256", "none", "EdDSA"])
def test_a_jwks_with_a_non_asymmetric_or_unknown_algorithm_is_refused_at_construction(
    algorithm: str,
) -> None:
    jwks = JWKSClient("http://127.0.0.1:9/jwks", cache_s=60, refresh_cooldown_s=0)
    with pytest.raises(ValueError, match=f"not an asymmetric algorithm: {algorithm}"):
        TokenVerifier(SECRET, jwks=jwks, algorithms=["RS256", algorithm])


async def test_a_token_signed_with_another_secret_is_refused() -> None:
    token = jwt.encode(_claims(), "another-secret-" + "o" * 40, algorithm="HS256")
    assert await _refusal(token) == "the token's signature is invalid"


async def test_an_alg_none_token_is_refused() -> None:
    token = jwt.encode(_claims(), "", algorithm="none")
    assert await _refusal(token) == "the token's algorithm is not accepted"


async def test_an_alg_none_token_is_refused_even_with_the_hs256_signature_attached() -> None:
    header, payload, signature = _hs256().split(".")
    none_header = jwt.utils.base64url_encode(b'{"alg":"none","typ":"JWT"}').decode()
    assert await _refusal(f"{none_header}.{payload}.{signature}") == (
        "the token's algorithm is not accepted"
    )
    assert header != none_header


async def test_an_rs256_token_is_refused_without_a_jwks() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = jwt.encode(_claims(), key, algorithm="RS256")
    assert await _refusal(token) == "the token's algorithm is not accepted"


async def test_an_es256_token_is_refused_without_a_jwks() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    token = jwt.encode(_claims(), key, algorithm="ES256")
    assert await _refusal(token) == "the token's algorithm is not accepted"


async def test_another_hmac_algorithm_with_the_right_secret_is_refused() -> None:
    token = jwt.encode(_claims(), SECRET, algorithm="HS512")
    assert await _refusal(token) == "the token's algorithm is not accepted"


@pytest.mark.parametrize("alg", [["HS256"], {"HS256": True}, 256, None])
async def test_an_alg_header_that_is_not_a_string_is_refused(alg: Any) -> None:
    _, payload, signature = _hs256().split(".")
    forged = jwt.utils.base64url_encode(json.dumps({"alg": alg, "typ": "JWT"}).encode()).decode()
    assert await _refusal(f"{forged}.{payload}.{signature}") == (
        "the token's algorithm is not accepted"
    )


async def test_a_token_signed_with_an_empty_secret_is_refused() -> None:
    # PyJWT refuses to sign with an empty key, so the token is put together by hand.
    signing_input = ".".join(
        jwt.utils.base64url_encode(json.dumps(part, default=int).encode()).decode()
        for part in ({"alg": "HS256", "typ": "JWT"}, _claims(iat=None, nbf=None, exp=_in(600)))
    )
    signature = hmac.new(b"", signing_input.encode(), hashlib.sha256).digest()
    token = f"{signing_input}.{jwt.utils.base64url_encode(signature).decode()}"
    assert await _refusal(token) == "the token's signature is invalid"


@pytest.mark.parametrize("token", ["", "not-a-jwt", "a.b.c", "e30", "Bearer x.y.z"])
async def test_a_malformed_token_is_refused(token: str) -> None:
    assert await _refusal(token) == "the token is malformed"


async def test_an_expired_token_is_refused() -> None:
    past = datetime.now(UTC) - timedelta(hours=1)
    token = _hs256(iat=past - timedelta(hours=1), nbf=past - timedelta(hours=1), exp=past)
    assert await _refusal(token) == "the token has expired"


async def test_a_token_expired_within_the_leeway_is_accepted_and_beyond_it_refused() -> None:
    token = _hs256(exp=datetime.now(UTC) - timedelta(seconds=10))

    assert (await TokenVerifier(SECRET, leeway_s=30).verify(token)).subject == "alice"
    assert await _refusal(token, TokenVerifier(SECRET, leeway_s=0)) == "the token has expired"


async def test_a_verified_token_holds_for_a_minute_at_most_and_never_past_its_exp() -> None:
    now = time.time()
    clock = [now]
    verifier = TokenVerifier(SECRET, leeway_s=0, clock=lambda: clock[0])
    long_lived, short_lived = _hs256(exp=int(now) + 3600), _hs256(exp=int(now) + 10)

    first, short = await verifier.verify(long_lived), await verifier.verify(short_lived)
    clock[0] = now + 9
    # Within its time a token is the same principal, its signature not checked again.
    assert await verifier.verify(long_lived) is first
    assert await verifier.verify(short_lived) is short
    clock[0] = now + 11
    # Past its `exp` it is verified again (here still valid by the real clock PyJWT reads)…
    assert await verifier.verify(short_lived) is not short
    assert await verifier.verify(long_lived) is first
    clock[0] = now + 61
    # …and any token after a minute.
    assert await verifier.verify(long_lived) is not first


async def test_a_refused_token_is_refused_again() -> None:
    verifier = TokenVerifier(SECRET)
    forged = jwt.encode(_claims(), "another-secret-" + "x" * 60, algorithm="HS256")

    for _ in range(2):
        with pytest.raises(AuthenticationFailed, match="signature is invalid"):
            await verifier.verify(forged)


async def test_a_token_not_valid_yet_beyond_the_leeway_is_refused() -> None:
    later = datetime.now(UTC) + timedelta(minutes=5)
    token = _hs256(nbf=later, exp=later + timedelta(minutes=10))
    assert await _refusal(token) == "the token is not valid yet"


async def test_a_token_valid_within_the_leeway_is_accepted() -> None:
    soon = datetime.now(UTC) + timedelta(seconds=10)
    token = _hs256(nbf=soon, iat=soon)
    assert (await TokenVerifier(SECRET, leeway_s=30).verify(token)).tenant_id == "acme"


@pytest.mark.parametrize("claim", ["exp", "sub", "tenant_id"])
async def test_a_token_missing_a_required_claim_is_refused(claim: str) -> None:
    token = _hs256(**{claim: None})
    assert await _refusal(token) == f"the token has no `{claim}` claim"


async def test_roles_may_be_a_list() -> None:
    principal = await TokenVerifier(SECRET).verify(_hs256(roles=["admin", "member"]))
    assert principal.roles == frozenset({"admin", "member"})


async def test_roles_may_be_a_space_separated_string() -> None:
    principal = await TokenVerifier(SECRET).verify(_hs256(roles="admin  member"))
    assert principal.roles == frozenset({"admin", "member"})


async def test_no_roles_claim_means_no_roles() -> None:
    principal = await TokenVerifier(SECRET).verify(_hs256(roles=None))
    assert principal.roles == frozenset()


@pytest.mark.parametrize("roles", [7, {"admin": True}, ["admin", 1]])
async def test_roles_of_another_shape_are_refused(roles: Any) -> None:
    assert (
        await _refusal(_hs256(roles=roles)) == "the token's `roles` claim must be a list of strings"
    )


@pytest.mark.parametrize(("claim", "limit"), [("sub", 255), ("tenant_id", 64)])
async def test_an_id_claim_at_its_length_limit_is_accepted(claim: str, limit: int) -> None:
    principal = await TokenVerifier(SECRET).verify(_hs256(**{claim: "x" * limit}))
    assert len(principal.subject if claim == "sub" else principal.tenant_id) == limit


@pytest.mark.parametrize(("claim", "limit"), [("sub", 255), ("tenant_id", 64)])
async def test_an_over_long_id_claim_is_refused(claim: str, limit: int) -> None:
    reason = await _refusal(_hs256(**{claim: "x" * (limit + 1)}))
    assert reason == f"the token's `{claim}` claim must be a non-empty string"


@pytest.mark.parametrize(("claim", "value"), [("sub", ""), ("tenant_id", ""), ("tenant_id", 42)])
async def test_an_empty_or_non_string_id_claim_is_refused(claim: str, value: Any) -> None:
    reason = await _refusal(_hs256(**{claim: value}))
    assert reason == f"the token's `{claim}` claim must be a non-empty string"


async def test_the_tenant_claim_name_is_configurable() -> None:
    verifier = TokenVerifier(SECRET, tenant_claim="org")
    principal = await verifier.verify(_hs256(tenant_id=None, org="globex"))
    assert principal.tenant_id == "globex"
    assert await _refusal(_hs256(), verifier) == "the token has no `org` claim"


async def test_a_dotted_claim_name_reaches_into_nested_objects() -> None:
    verifier = TokenVerifier(SECRET, tenant_claim="org.id", roles_claim="realm_access.roles")
    token = _hs256(tenant_id=None, roles=None, org={"id": "globex"}, realm_access={"roles": ["a"]})
    assert await verifier.verify(token) == Principal(
        subject="alice", tenant_id="globex", roles=frozenset({"a"})
    )


async def test_a_claim_whose_name_contains_dots_is_found_as_is_first() -> None:
    verifier = TokenVerifier(SECRET, tenant_claim="org.id")
    token = _hs256(tenant_id=None, **{"org.id": "exact", "org": {"id": "nested"}})
    assert (await verifier.verify(token)).tenant_id == "exact"


@pytest.mark.parametrize(
    ("org", "reason"),
    [
        (None, "the token has no `org.id` claim"),
        ("globex", "the token has no `org.id` claim"),
        ({"name": "globex"}, "the token has no `org.id` claim"),
        ({"id": {"name": "globex"}}, "the token's `org.id` claim must be a non-empty string"),
    ],
)
async def test_a_dotted_claim_path_that_leads_nowhere_usable_is_refused(
    org: Any, reason: str
) -> None:
    verifier = TokenVerifier(SECRET, tenant_claim="org.id")
    assert await _refusal(_hs256(tenant_id=None, org=org), verifier) == reason


async def test_a_nested_roles_claim_of_another_shape_is_refused_by_its_name() -> None:
    verifier = TokenVerifier(SECRET, roles_claim="realm_access.roles")
    reason = await _refusal(_hs256(realm_access={"roles": [1]}), verifier)
    assert reason == "the token's `realm_access.roles` claim must be a list of strings"


async def test_a_missing_nested_roles_claim_means_no_roles() -> None:
    verifier = TokenVerifier(SECRET, roles_claim="realm_access.roles")
    assert (await verifier.verify(_hs256(realm_access={}))).roles == frozenset()


@pytest.mark.parametrize("claim", ["sub", "tenant_id"])
@pytest.mark.parametrize("value", ["al\x00ice", "al\nice", "al\x7fice", "al\x85ice", "al\ud800ice"])
async def test_an_id_claim_with_control_characters_or_surrogates_is_refused(
    claim: str, value: str
) -> None:
    # PyJWT writes the claims as JSON; a lone surrogate travels as its `\ud800` escape.
    reason = await _refusal(_hs256(**{claim: value}))
    assert reason == f"the token's `{claim}` claim holds control characters"


@pytest.mark.parametrize("role", ["mem\x00ber", "mem\tber", "x" * 65])
async def test_a_role_with_control_characters_or_over_long_is_refused(role: str) -> None:
    reason = await _refusal(_hs256(roles=["viewer", role]))
    assert reason == (
        "the token's `roles` claim holds a role of control characters or longer than 64 characters"
    )


async def test_an_id_of_letters_from_any_script_is_accepted() -> None:
    principal = await TokenVerifier(SECRET).verify(_hs256(sub="Ĳsbrand-Łukasz 北京 \U0001f600"))
    assert principal.subject == "Ĳsbrand-Łukasz 北京 \U0001f600"
