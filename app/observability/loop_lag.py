"""How late the event loop runs what is due: the delay every coroutine of the process suffers
on top of its own work (a step's event, an SSE frame, a timeout firing).

A timer is armed every `interval_s` and notes by how much it fired after its deadline; a
callback that holds the loop for 300 ms shows as one sample of ~300 ms. Sampling costs a few
microseconds of CPU per sample, nothing in between.
"""

import asyncio
import time

from prometheus_client import CollectorRegistry, Histogram, generate_latest

SAMPLE_EVERY_S = 0.1
LAG_BUCKETS = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
)


class LoopLag:
    """Samples the running loop's lag into `omniforge_event_loop_lag_seconds` of its own
    registry, from start() to stop()."""

    def __init__(self, interval_s: float = SAMPLE_EVERY_S) -> None:
        self.registry = CollectorRegistry()
        self.lag = Histogram(
            "omniforge_event_loop_lag_seconds",
            f"How late the event loop ran a timer due every {interval_s:g} s: time every "
            "coroutine waits for the loop besides its own work",
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        self._interval_s = interval_s
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0

    def start(self) -> None:
        """Samples the running loop until stop(); a no-op when already sampling."""
        if self._timer is None:
            self._arm(asyncio.get_running_loop())

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        # A fine clock, not loop.time(): uvloop's is in milliseconds and read once per turn
        # of the loop, before the callbacks that would delay this one.
        self._due = time.perf_counter() + self._interval_s
        self._timer = loop.call_later(self._interval_s, self._fired, loop)

    def _fired(self, loop: asyncio.AbstractEventLoop) -> None:
        self.lag.observe(max(0.0, time.perf_counter() - self._due))
        self._arm(loop)
