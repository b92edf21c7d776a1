"""A tenant's secrets: sealed at rest (`store`), changed on behalf of callers with their audit
(`service`), opened for runs by the vault, each use held to the secret's scope (`scopes`), and
refused where a header would have to carry what it cannot (`headers`)."""

from app.resources.secrets.headers import UnsendableSecret, check_headers
from app.resources.secrets.scopes import UsableBy
from app.resources.secrets.service import SecretService, SecretsUnavailable
from app.resources.secrets.store import UNCHANGED, SecretRecord, Unchanged
from app.resources.secrets.vault import OpenedSecrets, Rotation, SecretVault, TenantSecrets

__all__ = [
    "UNCHANGED",
    "OpenedSecrets",
    "Rotation",
    "SecretRecord",
    "SecretService",
    "SecretVault",
    "SecretsUnavailable",
    "TenantSecrets",
    "Unchanged",
    "UnsendableSecret",
    "UsableBy",
    "check_headers",
]
