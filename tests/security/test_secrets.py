"""Sealing tenant secrets: AES-256-GCM bound to tenant and name, a key ring whose first key
seals and every key opens; and the `OMNIFORGE_SECRETS_KEY` setting those keys come from."""

import base64
import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from app.config import InsecureSettings, Settings
from app.security.secrets import KeyRing, Sealed, SecretUnreadable, key_id_of

KEY_A = bytes(range(32))
KEY_B = bytes(range(100, 132))
VALUE = "ghp_s3cr3t-token/ü+=="


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("OMNIFORGE_"):
            monkeypatch.delenv(name)


def _b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def test_a_sealed_value_opens_for_its_tenant_and_name_and_holds_no_plaintext() -> None:
    ring = KeyRing([KEY_A])

    sealed = ring.seal(VALUE, tenant_id="acme", name="TOKEN")

    assert sealed.key_id == key_id_of(KEY_A) == hashlib.sha256(KEY_A).hexdigest()[:8]
    assert ring.open(sealed, tenant_id="acme", name="TOKEN") == VALUE
    assert VALUE not in sealed.text
    assert _b64(VALUE.encode()) not in sealed.text
    # nonce (12 bytes) + ciphertext + tag (16 bytes)
    assert len(base64.b64decode(sealed.text)) == 12 + len(VALUE.encode()) + 16


def test_each_sealing_uses_a_fresh_nonce() -> None:
    ring = KeyRing([KEY_A])
    texts = {ring.seal(VALUE, tenant_id="acme", name="TOKEN").text for _ in range(20)}
    nonces = {base64.b64decode(text)[:12] for text in texts}
    assert len(texts) == len(nonces) == 20


@pytest.mark.parametrize(
    ("tenant_id", "name"),
    [("other", "TOKEN"), ("acme", "OTHER"), ("acme", "token"), ("acmeT", "OKEN")],
    ids=["other-tenant", "other-name", "name-case", "shifted-boundary"],
)
def test_a_value_copied_to_another_tenant_or_name_does_not_open(tenant_id: str, name: str) -> None:
    ring = KeyRing([KEY_A])
    sealed = ring.seal(VALUE, tenant_id="acme", name="TOKEN")

    with pytest.raises(SecretUnreadable, match="altered, or sealed for another tenant or name"):
        ring.open(sealed, tenant_id=tenant_id, name=name)


@pytest.mark.parametrize(
    "text",
    [
        lambda t: t[:-4] + ("AAAA" if t[-4:] != "AAAA" else "BBBB"),  # tag changed
        lambda t: "AAAA" + t[4:],  # nonce changed
        lambda t: t[:8],  # truncated
        lambda t: "not base64!",
        lambda t: "",
    ],
    ids=["tag", "nonce", "truncated", "not-base64", "empty"],
)
def test_an_altered_value_does_not_open(text: Callable[[str], str]) -> None:
    ring = KeyRing([KEY_A])
    sealed = ring.seal(VALUE, tenant_id="acme", name="TOKEN")
    altered = Sealed(sealed.key_id, text(sealed.text))

    with pytest.raises(SecretUnreadable) as raised:
        ring.open(altered, tenant_id="acme", name="TOKEN")
    assert VALUE not in str(raised.value)


def test_the_first_key_seals_and_every_key_opens() -> None:
    old = KeyRing([KEY_A]).seal(VALUE, tenant_id="acme", name="TOKEN")
    rotating = KeyRing([KEY_B, KEY_A])

    new = rotating.seal(VALUE, tenant_id="acme", name="TOKEN")

    assert rotating.sealing_key_id == new.key_id == key_id_of(KEY_B)
    assert rotating.key_ids == [key_id_of(KEY_B), key_id_of(KEY_A)]
    assert rotating.open(old, tenant_id="acme", name="TOKEN") == VALUE
    assert rotating.open(new, tenant_id="acme", name="TOKEN") == VALUE
    with pytest.raises(SecretUnreadable, match=f"key {key_id_of(KEY_A)}, which is not configured"):
        KeyRing([KEY_B]).open(old, tenant_id="acme", name="TOKEN")


def test_a_key_ring_refuses_keys_that_are_not_32_bytes() -> None:
    with pytest.raises(ValueError, match="at least one key"):
        KeyRing([])
    with pytest.raises(ValueError, match="32 bytes"):
        KeyRing([KEY_A, b"short"])


def test_the_setting_holds_several_keys_first_one_first(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, secrets_key=SecretStr(f"{_b64(KEY_B)}, {_b64(KEY_A)}"))

    assert settings.resolved_secrets_keys() == [KEY_B, KEY_A]
    assert not (tmp_path / "secrets-key").exists()


def test_production_reads_the_keys_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMNIFORGE_ENV", "production")
    monkeypatch.setenv("OMNIFORGE_JWT_SECRET", "k" * 40)
    monkeypatch.setenv("OMNIFORGE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("OMNIFORGE_SECRETS_KEY", f"{_b64(KEY_A)},{_b64(KEY_B)}")

    assert Settings().resolved_secrets_keys() == [KEY_A, KEY_B]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("not base64 at all", "key 1 of OMNIFORGE_SECRETS_KEY is not base64"),
        (_b64(b"sixteen bytes..."), "key 1 of OMNIFORGE_SECRETS_KEY is 16 bytes, not 32"),
        (f"{_b64(KEY_A)},{_b64(KEY_B)[:-1]}", "key 2 of OMNIFORGE_SECRETS_KEY is not base64"),
        (f"{_b64(KEY_A)},", "key 2 of OMNIFORGE_SECRETS_KEY is 0 bytes, not 32"),
        (" , ", "OMNIFORGE_SECRETS_KEY is empty"),
    ],
    ids=["not-base64", "short", "second-bad", "trailing-comma", "empty"],
)
def test_a_malformed_key_is_a_settings_error_that_does_not_echo_it(
    value: str, problem: str
) -> None:
    # As text, as the environment gives it: no SecretStr to hide it in the error.
    text: dict[str, Any] = {"secrets_key": value}
    with pytest.raises(ValidationError) as raised:
        Settings(**text)
    # What `omniforge` prints of it (`app.cli.configuration.problems`): where, and the message.
    [error] = raised.value.errors()
    message = error["msg"]
    assert error["loc"] == ("secrets_key",)
    assert problem in message
    # Nor anything else that shows the error: a malformed key is still most of a key.
    for part in value.split(","):
        if part.strip():
            assert part.strip() not in message
            assert part.strip() not in str(raised.value)


def test_production_without_a_key_is_refused_when_secrets_are_needed(tmp_path: Path) -> None:
    settings = Settings(env="production", jwt_secret=SecretStr("k" * 40), data_dir=tmp_path)

    with pytest.raises(InsecureSettings, match="OMNIFORGE_SECRETS_KEY is required outside"):
        settings.resolved_secrets_keys()
    assert not (tmp_path / "secrets-key").exists()


def test_development_without_a_key_generates_one_in_data_dir_and_reuses_it(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"

    first = Settings(data_dir=data_dir).resolved_secrets_keys()
    again = Settings(data_dir=data_dir).resolved_secrets_keys()

    path = data_dir / "secrets-key"
    assert first == again == [base64.b64decode(path.read_text(encoding="utf-8"))]
    assert len(first[0]) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in data_dir.iterdir()] == ["secrets-key"]  # no temporary left
