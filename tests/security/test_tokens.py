"""Bearer token verification: HS256 only, required claims, leeway, and the claims' shapes."""

from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from app.security import AuthenticationFailed, Principal, TokenVerifier, mint_token

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


def _hs256(**overrides: Any) -> str:
    return jwt.encode(_claims(**overrides), SECRET, algorithm="HS256")


def _refusal(token: str, verifier: TokenVerifier | None = None) -> str:
    with pytest.raises(AuthenticationFailed) as refused:
        (verifier or TokenVerifier(SECRET)).verify(token)
    assert refused.value.token_given
    return refused.value.reason


def test_a_minted_token_verifies_to_its_principal() -> None:
    token = mint_token(SECRET, tenant_id="acme", subject="alice", roles=["member", "viewer"])

    principal = TokenVerifier(SECRET).verify(token)

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


def test_a_token_signed_with_another_secret_is_refused() -> None:
    token = jwt.encode(_claims(), "another-secret-" + "o" * 40, algorithm="HS256")
    assert _refusal(token) == "the token's signature is invalid"


def test_an_alg_none_token_is_refused() -> None:
    token = jwt.encode(_claims(), None, algorithm="none")
    assert _refusal(token) == "the token's algorithm is not accepted"


def test_an_alg_none_token_is_refused_even_with_the_hs256_signature_attached() -> None:
    header, payload, signature = _hs256().split(".")
    none_header = jwt.utils.base64url_encode(b'{"alg":"none","typ":"JWT"}').decode()
    assert _refusal(f"{none_header}.{payload}.{signature}") == (
        "the token's algorithm is not accepted"
    )
    assert header != none_header


def test_an_rs256_token_is_refused() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = jwt.encode(_claims(), key, algorithm="RS256")
    assert _refusal(token) == "the token's algorithm is not accepted"


def test_an_es256_token_is_refused() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    token = jwt.encode(_claims(), key, algorithm="ES256")
    assert _refusal(token) == "the token's algorithm is not accepted"


def test_another_hmac_algorithm_with_the_right_secret_is_refused() -> None:
    token = jwt.encode(_claims(), SECRET, algorithm="HS512")
    assert _refusal(token) == "the token's algorithm is not accepted"


@pytest.mark.parametrize("token", ["", "not-a-jwt", "a.b.c", "e30", "Bearer x.y.z"])
def test_a_malformed_token_is_refused(token: str) -> None:
    assert _refusal(token) == "the token is malformed"


def test_an_expired_token_is_refused() -> None:
    past = datetime.now(UTC) - timedelta(hours=1)
    token = _hs256(iat=past - timedelta(hours=1), nbf=past - timedelta(hours=1), exp=past)
    assert _refusal(token) == "the token has expired"


def test_a_token_expired_within_the_leeway_is_accepted_and_beyond_it_refused() -> None:
    token = _hs256(exp=datetime.now(UTC) - timedelta(seconds=10))

    assert TokenVerifier(SECRET, leeway_s=30).verify(token).subject == "alice"
    assert _refusal(token, TokenVerifier(SECRET, leeway_s=0)) == "the token has expired"


def test_a_token_not_valid_yet_beyond_the_leeway_is_refused() -> None:
    later = datetime.now(UTC) + timedelta(minutes=5)
    token = _hs256(nbf=later, exp=later + timedelta(minutes=10))
    assert _refusal(token) == "the token is not valid yet"


def test_a_token_valid_within_the_leeway_is_accepted() -> None:
    soon = datetime.now(UTC) + timedelta(seconds=10)
    token = _hs256(nbf=soon, iat=soon)
    assert TokenVerifier(SECRET, leeway_s=30).verify(token).tenant_id == "acme"


@pytest.mark.parametrize("claim", ["exp", "sub", "tenant_id"])
def test_a_token_missing_a_required_claim_is_refused(claim: str) -> None:
    token = _hs256(**{claim: None})
    assert _refusal(token) == f"the token has no `{claim}` claim"


def test_roles_may_be_a_list() -> None:
    principal = TokenVerifier(SECRET).verify(_hs256(roles=["admin", "member"]))
    assert principal.roles == frozenset({"admin", "member"})


def test_roles_may_be_a_space_separated_string() -> None:
    principal = TokenVerifier(SECRET).verify(_hs256(roles="admin  member"))
    assert principal.roles == frozenset({"admin", "member"})


def test_no_roles_claim_means_no_roles() -> None:
    principal = TokenVerifier(SECRET).verify(_hs256(roles=None))
    assert principal.roles == frozenset()


@pytest.mark.parametrize("roles", [7, {"admin": True}, ["admin", 1]])
def test_roles_of_another_shape_are_refused(roles: Any) -> None:
    assert _refusal(_hs256(roles=roles)) == "the token's `roles` claim must be a list of strings"


@pytest.mark.parametrize(("claim", "limit"), [("sub", 255), ("tenant_id", 64)])
def test_an_id_claim_at_its_length_limit_is_accepted(claim: str, limit: int) -> None:
    principal = TokenVerifier(SECRET).verify(_hs256(**{claim: "x" * limit}))
    assert len(principal.subject if claim == "sub" else principal.tenant_id) == limit


@pytest.mark.parametrize(("claim", "limit"), [("sub", 255), ("tenant_id", 64)])
def test_an_over_long_id_claim_is_refused(claim: str, limit: int) -> None:
    reason = _refusal(_hs256(**{claim: "x" * (limit + 1)}))
    assert reason == f"the token's `{claim}` claim must be a non-empty string"


@pytest.mark.parametrize(("claim", "value"), [("sub", ""), ("tenant_id", ""), ("tenant_id", 42)])
def test_an_empty_or_non_string_id_claim_is_refused(claim: str, value: Any) -> None:
    reason = _refusal(_hs256(**{claim: value}))
    assert reason == f"the token's `{claim}` claim must be a non-empty string"
