"""What the service tells its operators: the log format and where traces go."""

from typing import Literal

from pydantic import Field

from app.config.values import Section


class ObservabilitySettings(Section):
    """Logs and traces."""

    log_format: Literal["text", "json"] = Field(
        default="text",
        description="`json`: `omniforge serve` writes one JSON object per line (uvicorn's lines "
        "included) with the request id, tenant, task and chain ids where known.",
    )
    # The standard OpenTelemetry variables, not OMNIFORGE_ ones: collectors and operators
    # already set these (an alias is read without the prefix).
    otel_exporter_otlp_endpoint: str | None = Field(
        default=None,
        validation_alias="OTEL_EXPORTER_OTLP_ENDPOINT",
        description="OTLP/HTTP base URL (e.g. http://collector:4318): each run's trace is "
        "exported to its `/v1/traces`. Unset: no tracing at all.",
    )
    otel_service_name: str = Field(
        default="omniforge",
        validation_alias="OTEL_SERVICE_NAME",
        description="`service.name` of the exported traces.",
    )
