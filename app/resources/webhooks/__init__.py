"""A tenant's webhooks: endpoints and deliveries as stored (`store`) and changed on behalf of
callers with their audit (`service`), their signing secrets (`signing`), who hears of which
run event (`subscriptions`), and the dispatcher that sends the outbox."""

from dataclasses import dataclass
from datetime import timedelta

from app.config import Settings
from app.resources.webhooks.dispatcher import Backoff, WebhookDispatcher
from app.resources.webhooks.signing import WebhookKeys
from app.resources.webhooks.store import AttemptRecord, DeliveryRecord, EndpointRecord
from app.resources.webhooks.subscriptions import WebhookSubscriptions
from app.security.log_masking import SecretMasker
from app.security.secrets import KeyRing
from app.storage.database import Database
from app.storage.notify import Notices
from app.tools.services import NetworkPolicy

__all__ = [
    "AttemptRecord",
    "DeliveryRecord",
    "EndpointRecord",
    "WebhookDispatcher",
    "WebhookKeys",
    "WebhookSubscriptions",
    "Webhooks",
]


@dataclass(frozen=True, slots=True)
class Webhooks:
    """What the API and runs reach webhooks through."""

    subscriptions: WebhookSubscriptions
    keys: WebhookKeys
    dispatcher: WebhookDispatcher

    @classmethod
    def build(
        cls,
        database: Database,
        notices: Notices,
        settings: Settings,
        *,
        keys: KeyRing,
        masker: SecretMasker,
        network: NetworkPolicy,
    ) -> "Webhooks":
        signing = WebhookKeys(database, keys, masker)
        dispatcher = WebhookDispatcher(
            database,
            notices,
            signing,
            network=network,
            timeout_s=settings.webhook_timeout_s,
            backoff=Backoff(settings.webhook_retry_initial_s, settings.webhook_retry_max_s),
            retry_for=timedelta(seconds=settings.webhook_retry_for_s),
            concurrency=settings.webhook_concurrency,
        )
        return cls(
            WebhookSubscriptions(database, ttl_s=settings.tenant_cache_s), signing, dispatcher
        )
