"""What a delivery says of a run's usage: money as the REST API writes it (plain decimals,
no trailing zeros, no exponent), whatever the precision it was summed at."""

from decimal import Decimal

import pytest

from app.chain import ChainMetrics, quantize_usd
from app.storage.webhook_outbox import usage_of


@pytest.mark.parametrize(
    "cost",
    [quantize_usd(0), quantize_usd(0.000021), Decimal(0), quantize_usd(Decimal("12.5"))],
    ids=["quantized-zero", "quantized", "zero", "dollars"],
)
def test_a_deliverys_cost_reads_as_the_task_resources(cost: Decimal) -> None:
    metrics = ChainMetrics(total_cost_usd=cost)

    delivered = usage_of(metrics)["cost_usd"]

    assert delivered == metrics.model_dump(mode="json")["total_cost_usd"]
