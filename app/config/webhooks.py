"""How webhooks are delivered: each attempt's timeout, retries and concurrency."""

from pydantic import Field

from app.config.values import Section


class WebhookSettings(Section):
    """Webhook deliveries of this process."""

    webhook_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="One webhook delivery attempt, connecting included; a receiver that has "
        "not answered by then failed the attempt.",
    )
    webhook_retry_initial_s: float = Field(
        default=5.0,
        gt=0,
        description="The wait before a failed webhook delivery's first retry; each further "
        "retry waits twice as long (up to `webhook_retry_max_s`), give or take 20 %.",
    )
    webhook_retry_max_s: float = Field(
        default=3600.0, gt=0, description="The longest wait between two webhook attempts."
    )
    webhook_retry_for_s: float = Field(
        default=86_400.0,
        gt=0,
        description="How long a webhook delivery is retried after it was stored (or "
        "redelivered by hand); an attempt failing after that marks it `failed`.",
    )
    webhook_concurrency: int = Field(
        default=8,
        ge=1,
        le=256,
        description="Webhook deliveries this process sends at once.",
    )
