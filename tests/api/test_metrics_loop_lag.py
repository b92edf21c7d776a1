"""`GET /metrics` reports how late the service's event loop runs: a request that holds the
loop shows as a late sample in `omniforge_event_loop_lag_seconds`."""

import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.service import Service

LAG = "omniforge_event_loop_lag_seconds"


async def _lag_histogram(service: Service) -> dict[str, float]:
    """The histogram's samples as served: `count`, `sum`, and `le=<bound>` per bucket."""
    async with httpx.AsyncClient(base_url=service.base_url) as client:
        response = await client.get("/metrics")  # no token needed
    assert response.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    assert families[LAG].type == "histogram"
    values: dict[str, float] = {}
    for sample in families[LAG].samples:
        kind = sample.name.removeprefix(LAG + "_")
        values[f"le={sample.labels['le']}" if kind == "bucket" else kind] = sample.value
    return values


def _hold_the_loop(seconds: float) -> None:
    """What is measured: a callback that keeps the loop from everything else."""
    time.sleep(seconds)


async def test_a_held_loop_is_reported_as_a_late_sample(service: Service) -> None:
    before = await _lag_histogram(service)
    # The service serves on this test's event loop: hold it as a slow callback would. The
    # sampler's timer (due within 0.1 s) is then overdue by 0.4 to 0.5 s and fires on the
    # loop's next turn, before the next request is even read.
    _hold_the_loop(0.5)
    after = await _lag_histogram(service)

    late_before = before["count"] - before["le=0.2"]
    late_after = after["count"] - after["le=0.2"]
    assert late_after == late_before + 1
    assert after["sum"] - before["sum"] >= 0.39
    assert set(after) >= {"le=0.001", "le=0.01", "le=0.1", "le=1.0", "le=+Inf", "count", "sum"}
