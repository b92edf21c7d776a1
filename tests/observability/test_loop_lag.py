"""The event loop's lag: a loop held by a callback shows as a late sample of that length."""

import asyncio
import time

from prometheus_client.parser import text_string_to_metric_families

from app.observability.loop_lag import LoopLag


def _samples(lag: LoopLag) -> dict[str, float]:
    """`omniforge_event_loop_lag_seconds` as rendered: `count`, `sum`, and `le=<bound>`."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(lag.render().decode()):
        for sample in family.samples:
            key = sample.name.rsplit("_", 1)[1]
            values[f"le={sample.labels['le']}" if key == "bucket" else key] = sample.value
    return values


def _hold_the_loop(seconds: float) -> None:
    """What is measured: a callback that keeps the loop from everything else."""
    time.sleep(seconds)


async def _until_sampled(lag: LoopLag, count: int) -> dict[str, float]:
    """Turns of the loop until the sampler's timer has fired `count` times (the histogram has
    no event to wait on)."""
    async with asyncio.timeout(5):
        while _samples(lag)["count"] < count:  # noqa: ASYNC110
            await asyncio.sleep(0)
    return _samples(lag)


async def test_a_held_loop_shows_as_a_sample_as_late_as_it_was_held() -> None:
    lag = LoopLag(interval_s=0.01)
    lag.start()
    try:
        _hold_the_loop(0.3)
        samples = await _until_sampled(lag, 1)
    finally:
        lag.stop()

    assert samples["count"] == 1
    assert samples["le=0.2"] == 0
    assert 0.28 <= samples["sum"] < 5


async def test_sampling_goes_on_until_stopped_and_starts_once() -> None:
    lag = LoopLag(interval_s=0.01)
    lag.start()
    lag.start()
    try:
        samples = await _until_sampled(lag, 3)
    finally:
        lag.stop()

    assert samples["count"] == 3  # one timer, not two
    assert samples["le=+Inf"] == 3
