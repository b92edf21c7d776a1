"""The JWT settings: outside development a strong secret or a JWKS with issuer and audience,
a secret generated once in development; the verifier built from them; and the
`omniforge token` / `omniforge serve` commands that depend on them."""

import asyncio
import os
import socket
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jwt
import pytest
from pydantic import SecretStr, ValidationError

from app.cli import main
from app.config import MIN_JWT_SECRET_BYTES, InsecureSettings, Settings
from app.security import AuthenticationFailed, Principal, TokenVerifier, mint_token

STRONG_SECRET = "settings-test-secret-" + "k" * 40
ISSUER = "https://idp.example.com/realms/acme"
AUDIENCE = "omniforge"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what a test sets: no OMNIFORGE_* variable of the machine running the suite."""
    for name in list(os.environ):
        if name.startswith("OMNIFORGE_"):
            monkeypatch.delenv(name)


def test_production_without_a_secret_is_refused() -> None:
    with pytest.raises(ValidationError, match="OMNIFORGE_JWT_SECRET"):
        Settings(env="production")


@pytest.mark.parametrize("length", [1, MIN_JWT_SECRET_BYTES - 1])
def test_production_with_a_short_secret_is_refused(length: int) -> None:
    with pytest.raises(ValidationError, match=f"at least {MIN_JWT_SECRET_BYTES} bytes"):
        Settings(env="production", jwt_secret=SecretStr("k" * length))


def test_production_counts_the_secret_in_bytes_not_characters() -> None:
    with pytest.raises(ValidationError, match="OMNIFORGE_JWT_SECRET"):
        Settings(env="production", jwt_secret=SecretStr("é" * 15 + "k"))  # 16 characters, 31 bytes
    settings = Settings(env="production", jwt_secret=SecretStr("é" * 16))  # 32 bytes
    assert settings.resolved_jwt_secret() == "é" * 16


def test_production_reads_the_secret_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OMNIFORGE_ENV", "production")
    monkeypatch.setenv("OMNIFORGE_JWT_SECRET", STRONG_SECRET)
    assert Settings().resolved_jwt_secret() == STRONG_SECRET


@pytest.fixture
def jwks_url() -> Iterator[str]:
    """A JWKS URL on 127.0.0.1 that refuses connections: these tests must not fetch it."""
    with socket.socket() as never_listening:
        never_listening.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{never_listening.getsockname()[1]}/jwks"


def test_production_with_a_jwks_issuer_and_audience_needs_no_secret(
    jwks_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        env="production",
        data_dir=tmp_path,
        jwt_jwks_url=jwks_url,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
    )

    assert settings.hs256_secret() is None
    with pytest.raises(InsecureSettings, match="OMNIFORGE_JWT_SECRET is required"):
        settings.resolved_jwt_secret()
    assert not (tmp_path / "jwt-secret").exists()


@pytest.mark.parametrize(
    "missing", [("jwt_issuer",), ("jwt_audience",), ("jwt_issuer", "jwt_audience")]
)
@pytest.mark.parametrize(
    "secret", [None, SecretStr(STRONG_SECRET)], ids=["jwks-only", "with-secret"]
)
def test_production_with_a_jwks_needs_an_issuer_and_an_audience(
    missing: tuple[str, ...], secret: SecretStr | None, jwks_url: str
) -> None:
    values: dict[str, Any] = {"jwt_issuer": ISSUER, "jwt_audience": AUDIENCE}
    values |= dict.fromkeys(missing, "")
    with pytest.raises(
        ValidationError, match="OMNIFORGE_JWT_ISSUER and OMNIFORGE_JWT_AUDIENCE must be set"
    ):
        Settings(env="production", jwt_jwks_url=jwks_url, jwt_secret=secret, **values)


@pytest.mark.parametrize("secret", ["", "k" * (MIN_JWT_SECRET_BYTES - 1)], ids=["empty", "short"])
def test_production_with_a_jwks_still_refuses_a_weak_secret(secret: str, jwks_url: str) -> None:
    with pytest.raises(ValidationError, match=f"at least {MIN_JWT_SECRET_BYTES} bytes"):
        Settings(
            env="production",
            jwt_jwks_url=jwks_url,
            jwt_issuer=ISSUER,
            jwt_audience=AUDIENCE,
            jwt_secret=SecretStr(secret),
        )


def test_production_with_a_jwks_and_a_strong_secret_keeps_hs256(jwks_url: str) -> None:
    settings = Settings(
        env="production",
        jwt_jwks_url=jwks_url,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        jwt_secret=SecretStr(STRONG_SECRET),
    )
    assert settings.hs256_secret() == settings.resolved_jwt_secret() == STRONG_SECRET


def test_development_with_a_jwks_needs_no_issuer_audience_or_secret(
    jwks_url: str, tmp_path: Path
) -> None:
    settings = Settings(env="development", data_dir=tmp_path, jwt_jwks_url=jwks_url)
    assert settings.hs256_secret() == (tmp_path / "jwt-secret").read_text(encoding="utf-8").strip()


def test_production_reads_the_jwks_settings_from_the_environment(
    jwks_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMNIFORGE_ENV", "production")
    monkeypatch.setenv("OMNIFORGE_JWT_JWKS_URL", jwks_url)
    monkeypatch.setenv("OMNIFORGE_JWT_ISSUER", ISSUER)
    monkeypatch.setenv("OMNIFORGE_JWT_AUDIENCE", AUDIENCE)
    monkeypatch.setenv("OMNIFORGE_JWT_ALGORITHMS", '["ES256"]')

    settings = Settings()

    assert (settings.jwt_jwks_url, settings.jwt_algorithms) == (jwks_url, ["ES256"])
    assert settings.hs256_secret() is None


async def test_the_verifier_from_jwks_only_production_settings_refuses_hs256_tokens(
    jwks_url: str,
) -> None:
    settings = Settings(
        env="production", jwt_jwks_url=jwks_url, jwt_issuer=ISSUER, jwt_audience=AUDIENCE
    )
    token = mint_token(STRONG_SECRET, tenant_id="T", subject="S", roles=[])

    verifier = TokenVerifier.from_settings(settings)
    try:
        with pytest.raises(AuthenticationFailed, match="the token's algorithm is not accepted"):
            await verifier.verify(token)
    finally:
        await verifier.aclose()


async def test_the_verifier_from_settings_reads_the_claim_names_and_leeway() -> None:
    settings = Settings(
        jwt_secret=SecretStr(STRONG_SECRET),
        jwt_tenant_claim="org.id",
        jwt_roles_claim="realm_access.roles",
        jwt_leeway_s=0,
    )
    now = int(datetime.now(UTC).timestamp())
    claims = {"sub": "S", "org": {"id": "T"}, "realm_access": {"roles": ["a", "b"]}}
    token = jwt.encode({**claims, "exp": now + 60}, STRONG_SECRET, algorithm="HS256")
    expired = jwt.encode({**claims, "exp": now - 5}, STRONG_SECRET, algorithm="HS256")

    verifier = TokenVerifier.from_settings(settings)
    try:
        assert await verifier.verify(token) == Principal(
            subject="S", tenant_id="T", roles=frozenset({"a", "b"})
        )
        with pytest.raises(AuthenticationFailed, match="the token has expired"):
            await verifier.verify(expired)  # within the default 30 s leeway, not within 0
    finally:
        await verifier.aclose()


def test_development_without_a_secret_generates_one_in_data_dir_and_reuses_it(
    tmp_path: Path,
) -> None:
    settings = Settings(env="development", data_dir=tmp_path / "data")

    first = settings.resolved_jwt_secret()
    second = settings.resolved_jwt_secret()
    # Another process with the same settings (`omniforge token` beside the server) agrees.
    third = Settings(env="development", data_dir=tmp_path / "data").resolved_jwt_secret()

    path = tmp_path / "data" / "jwt-secret"
    assert first == second == third == path.read_text(encoding="utf-8").strip()
    assert len(first.encode()) >= MIN_JWT_SECRET_BYTES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_development_with_a_short_explicit_secret_is_refused_when_resolved(
    tmp_path: Path,
) -> None:
    settings = Settings(env="development", data_dir=tmp_path, jwt_secret=SecretStr("short"))
    with pytest.raises(InsecureSettings):
        settings.resolved_jwt_secret()
    assert not (tmp_path / "jwt-secret").exists()


async def test_omniforge_token_prints_a_token_the_verifier_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OMNIFORGE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("OMNIFORGE_JWT_SECRET", STRONG_SECRET)

    minted_at = datetime.now(UTC).timestamp()
    # `token` runs an event loop of its own (it reads the tenant from the database).
    code = await asyncio.to_thread(
        main,
        ["token", "--tenant", "default", "--sub", "S", "--roles", "member,viewer", "--ttl", "30m"],
    )
    token = capsys.readouterr().out.strip()

    assert code == 0
    assert await TokenVerifier(STRONG_SECRET).verify(token) == Principal(
        subject="S", tenant_id="default", roles=frozenset({"member", "viewer"})
    )
    claims = jwt.decode(token, STRONG_SECRET, algorithms=["HS256"])
    assert claims["exp"] - claims["iat"] == 30 * 60
    assert abs(claims["exp"] - (minted_at + 30 * 60)) <= 5


async def test_omniforge_token_in_development_uses_the_generated_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OMNIFORGE_DATA_DIR", str(tmp_path))

    code = await asyncio.to_thread(main, ["token", "--tenant", "default", "--sub", "S"])
    token = capsys.readouterr().out.strip()

    secret = Settings(data_dir=tmp_path).resolved_jwt_secret()
    assert code == 0
    assert (await TokenVerifier(secret).verify(token)).roles == frozenset({"member"})


@pytest.mark.parametrize("ttl", ["30", "0m", "-5m", "1.5h", "30x", "thirty", ""])
def test_omniforge_token_with_a_bad_ttl_is_a_usage_error(
    ttl: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OMNIFORGE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("OMNIFORGE_JWT_SECRET", STRONG_SECRET)

    with pytest.raises(SystemExit) as exited:
        main(["token", "--tenant", "T", "--sub", "S", "--ttl", ttl])

    captured = capsys.readouterr()
    assert exited.value.code == 2
    assert "--ttl" in captured.err
    assert captured.out == ""  # no token


@pytest.mark.parametrize("secret", [None, "k" * (MIN_JWT_SECRET_BYTES - 1)], ids=["none", "short"])
def test_omniforge_serve_in_production_without_a_strong_secret_refuses_before_starting(
    secret: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data_dir = tmp_path / "data"
    monkeypatch.setenv("OMNIFORGE_ENV", "production")
    monkeypatch.setenv("OMNIFORGE_DATA_DIR", str(data_dir))
    if secret is not None:
        monkeypatch.setenv("OMNIFORGE_JWT_SECRET", secret)

    code = main(["serve", "--port", "0"])

    err = capsys.readouterr().err
    assert code == 2
    assert "configuration error" in err
    assert "OMNIFORGE_JWT_SECRET" in err
    assert f"at least {MIN_JWT_SECRET_BYTES} bytes" in err
    assert secret is None or secret not in err  # a rejected secret is not echoed
    assert not data_dir.exists()  # no database was created or migrated
