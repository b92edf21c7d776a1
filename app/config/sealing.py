"""The keys that seal tenant secrets, and their rotation."""

import base64
import binascii
import secrets

from pydantic import Field, SecretStr, field_validator

from app.config.deployment import DeploymentSettings, InsecureSettings
from app.config.values import kept_in

SECRETS_KEY_BYTES = 32
_DEV_SECRETS_KEY_FILE = "secrets-key"


class SealingSettings(DeploymentSettings):
    """The sealing keys; required outside development by the processes that open secrets."""

    secrets_key: SecretStr | None = Field(
        default=None,
        description="Key(s) that seal tenant secrets (AES-256-GCM): base64 of 32 bytes; several, "
        "comma-separated, during a rotation: the first seals, each opens. Required outside "
        "development; in development one is generated into the data dir.",
    )

    @field_validator("secrets_key")
    @classmethod
    def _secrets_keys_are_well_formed(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            _secrets_keys(value.get_secret_value())
        return value

    def resolved_secrets_keys(self) -> list[bytes]:
        """The keys of tenant secrets, the sealing one first (each 32 bytes). In development
        with none set, one is generated once and kept in `data_dir`. Raises
        `InsecureSettings` outside development when none is set: checked here, not when the
        settings load, so that only the processes that open secrets need the key."""
        if self.secrets_key is not None:
            return _secrets_keys(self.secrets_key.get_secret_value())
        if self.env != "development":
            raise InsecureSettings(
                "OMNIFORGE_SECRETS_KEY is required outside development (base64 of 32 random "
                "bytes, e.g. `openssl rand -base64 32`)"
            )
        return _secrets_keys(kept_in(self.data_dir / _DEV_SECRETS_KEY_FILE, _new_secrets_key))


def _new_secrets_key() -> str:
    return base64.b64encode(secrets.token_bytes(SECRETS_KEY_BYTES)).decode()


def _secrets_keys(text: str) -> list[bytes]:
    """`OMNIFORGE_SECRETS_KEY`'s keys; a `ValueError` naming the malformed one by position
    (never its value)."""
    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        raise ValueError("OMNIFORGE_SECRETS_KEY is empty")
    keys: list[bytes] = []
    for position, part in enumerate(parts, start=1):
        try:
            key = base64.b64decode(part, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(
                f"key {position} of OMNIFORGE_SECRETS_KEY is not base64 (each key is base64 of "
                f"{SECRETS_KEY_BYTES} bytes, comma-separated)"
            ) from None
        if len(key) != SECRETS_KEY_BYTES:
            raise ValueError(
                f"key {position} of OMNIFORGE_SECRETS_KEY is {len(key)} bytes, not "
                f"{SECRETS_KEY_BYTES} (e.g. `openssl rand -base64 32`)"
            )
        keys.append(key)
    return keys
