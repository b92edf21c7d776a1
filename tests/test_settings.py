"""The JWT secret: strong outside development, generated once in development; and the
`omniforge token` / `omniforge serve` commands that depend on it."""

import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import jwt
import pytest
from pydantic import ValidationError

from app.cli import main
from app.config import MIN_JWT_SECRET_BYTES, InsecureSettings, Settings
from app.security import Principal, TokenVerifier

STRONG_SECRET = "settings-test-secret-" + "k" * 40


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
        Settings(env="production", jwt_secret="k" * length)


def test_production_counts_the_secret_in_bytes_not_characters() -> None:
    with pytest.raises(ValidationError, match="OMNIFORGE_JWT_SECRET"):
        Settings(env="production", jwt_secret="é" * 15 + "k")  # 16 characters, 31 bytes
    settings = Settings(env="production", jwt_secret="é" * 16)  # 32 bytes
    assert settings.resolved_jwt_secret() == "é" * 16


def test_production_reads_the_secret_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OMNIFORGE_ENV", "production")
    monkeypatch.setenv("OMNIFORGE_JWT_SECRET", STRONG_SECRET)
    assert Settings().resolved_jwt_secret() == STRONG_SECRET


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
    settings = Settings(env="development", data_dir=tmp_path, jwt_secret="short")
    with pytest.raises(InsecureSettings):
        settings.resolved_jwt_secret()
    assert not (tmp_path / "jwt-secret").exists()


def test_omniforge_token_prints_a_token_the_verifier_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OMNIFORGE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("OMNIFORGE_JWT_SECRET", STRONG_SECRET)

    minted_at = datetime.now(UTC).timestamp()
    code = main(
        ["token", "--tenant", "T", "--sub", "S", "--roles", "member,viewer", "--ttl", "30m"]
    )
    token = capsys.readouterr().out.strip()

    assert code == 0
    assert TokenVerifier(STRONG_SECRET).verify(token) == Principal(
        subject="S", tenant_id="T", roles=frozenset({"member", "viewer"})
    )
    claims = jwt.decode(token, STRONG_SECRET, algorithms=["HS256"])
    assert claims["exp"] - claims["iat"] == 30 * 60
    assert abs(claims["exp"] - (minted_at + 30 * 60)) <= 5


def test_omniforge_token_in_development_uses_the_generated_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OMNIFORGE_DATA_DIR", str(tmp_path))

    code = main(["token", "--tenant", "T", "--sub", "S"])
    token = capsys.readouterr().out.strip()

    secret = Settings(data_dir=tmp_path).resolved_jwt_secret()
    assert code == 0
    assert TokenVerifier(secret).verify(token).roles == frozenset({"member"})


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
