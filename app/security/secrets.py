"""Sealing tenant secrets: AES-256-GCM with a random 96-bit nonce per value, bound to its tenant
and name (associated data), under a key ring whose first key seals and whose every key opens, so
that keys can be rotated without a moment when stored secrets cannot be read."""

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from app.errors import OmniForgeError

KEY_BYTES = 32
NONCE_BYTES = 12


class SecretUnreadable(OmniForgeError):
    """A sealed value that none of the keys opens: sealed under a key no longer configured,
    altered, or copied to another tenant or name. The message names neither value nor key."""


@dataclass(frozen=True, slots=True)
class Sealed:
    """A sealed value as stored: the id of the key that sealed it and the nonce with the
    ciphertext (and its tag), in base64."""

    key_id: str
    text: str


def key_id_of(key: bytes) -> str:
    """A key's public name: the first 8 hex digits of its SHA-256."""
    return hashlib.sha256(key).hexdigest()[:8]


class KeyRing:
    """The configured keys: the first seals, each opens the values it sealed."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys:
            raise ValueError("a key ring needs at least one key")
        if any(len(key) != KEY_BYTES for key in keys):
            raise ValueError(f"every key of a key ring is {KEY_BYTES} bytes")
        self._ciphers = {key_id_of(key): AESGCM(key) for key in keys}
        self.sealing_key_id = key_id_of(keys[0])

    @property
    def key_ids(self) -> list[str]:
        return list(self._ciphers)

    def seal(self, value: str, *, tenant_id: str, name: str) -> Sealed:
        nonce = os.urandom(NONCE_BYTES)
        cipher = self._ciphers[self.sealing_key_id]
        sealed = cipher.encrypt(nonce, value.encode(), _bound_to(tenant_id, name))
        return Sealed(self.sealing_key_id, base64.b64encode(nonce + sealed).decode())

    def open(self, sealed: Sealed, *, tenant_id: str, name: str) -> str:
        """The value `sealed` holds, if it was sealed for this tenant and name under one of
        these keys; else `SecretUnreadable`."""
        cipher = self._ciphers.get(sealed.key_id)
        if cipher is None:
            raise SecretUnreadable(
                f"secret {name!r} is sealed under key {sealed.key_id}, which is not configured "
                f"(configured: {', '.join(self._ciphers)})"
            )
        try:
            data = base64.b64decode(sealed.text, validate=True)
            value = cipher.decrypt(
                data[:NONCE_BYTES], data[NONCE_BYTES:], _bound_to(tenant_id, name)
            )
            return value.decode()
        except (binascii.Error, ValueError, InvalidTag):
            raise SecretUnreadable(
                f"secret {name!r} does not open with key {sealed.key_id}: it was altered, or "
                "sealed for another tenant or name"
            ) from None


def _bound_to(tenant_id: str, name: str) -> bytes:
    # JSON keeps the two apart whatever they contain: ("a", "b:c") and ("a:b", "c") differ.
    return json.dumps(["omniforge-secret", tenant_id, name]).encode()
