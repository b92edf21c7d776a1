"""Webhook signing secrets: made here in the Standard Webhooks form (`whsec_<base64>`), sealed
at rest under the service's key ring like tenant secrets, each bound to its tenant and owner
(an endpoint, or the tenant's one-off task webhooks); and the headers that sign a delivery,
computed by the `standardwebhooks` library itself."""

import base64
import secrets
from datetime import UTC, datetime
from uuid import UUID

from standardwebhooks import Webhook

from app.chain.models import utc_now
from app.resources.webhooks.store import WebhookRepository
from app.security.log_masking import SecretMasker
from app.security.secrets import KeyRing, Sealed
from app.storage.database import Database

SECRET_BYTES = 32
TASK_SECRET_NAME = "webhook:tasks"


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def endpoint_secret_name(endpoint_id: UUID) -> str:
    """What an endpoint's sealed secret is bound to: it opens for that endpoint alone."""
    return f"webhook:{endpoint_id}"


def signed_headers(secret: str, message_id: str, at: datetime, body: str) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt (`at`: when it is sent)."""
    at = at.astimezone(UTC)
    signature = Webhook(secret).sign(message_id, at, body)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
    }


class WebhookKeys:
    """Seals and opens webhook secrets; every value opened or made is learnt by `masker`, so
    that no log line shows it."""

    def __init__(self, database: Database, keys: KeyRing, masker: SecretMasker) -> None:
        self._database = database
        self._keys = keys
        self._masker = masker

    def mask(self, text: str) -> str:
        """`text` without any secret value this process has opened (a receiver's answer or
        error may echo what it was sent)."""
        return self._masker(text)

    def seal(self, tenant_id: str, name: str, value: str) -> Sealed:
        self._masker.learn([value])
        return self._keys.seal(value, tenant_id=tenant_id, name=name)

    def open(self, tenant_id: str, name: str, sealed: Sealed) -> str:
        """`SecretUnreadable` when no configured key opens it."""
        value = self._keys.open(sealed, tenant_id=tenant_id, name=name)
        self._masker.learn([value])
        return value

    async def task_secret(self, tenant_id: str) -> tuple[str, datetime]:
        """The secret of the tenant's one-off task webhooks and when it was set: made on first
        use (the first of concurrent makers wins; the others read its)."""
        async with self._database.read() as connection:
            stored = await WebhookRepository(connection, tenant_id).task_secret()
        if stored is None:
            value = new_secret()
            sealed = self.seal(tenant_id, TASK_SECRET_NAME, value)
            async with self._database.transaction() as connection:
                repository = WebhookRepository(connection, tenant_id)
                if await repository.add_task_secret(sealed.key_id, sealed.text, at=utc_now()):
                    stored = await repository.task_secret()
            if stored is None:
                async with self._database.read() as connection:
                    stored = await WebhookRepository(connection, tenant_id).task_secret()
        assert stored is not None
        key_id, text, at = stored
        return self.open(tenant_id, TASK_SECRET_NAME, Sealed(key_id, text)), at

    async def rotate_task_secret(self, tenant_id: str) -> tuple[str, datetime]:
        """A new secret for the tenant's one-off task webhooks; the old one signs no more."""
        await self.task_secret(tenant_id)  # made first, if it never was
        value = new_secret()
        sealed = self.seal(tenant_id, TASK_SECRET_NAME, value)
        at = utc_now()
        async with self._database.transaction() as connection:
            await WebhookRepository(connection, tenant_id).replace_task_secret(
                sealed.key_id, sealed.text, at=at
            )
        return value, at
