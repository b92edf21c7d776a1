"""What `scripts/bench sandbox` prints, against the targets of the sandbox work."""

import os

from bench import sandbox
from bench.results import record

ROUND_TRIP_TARGET_MS = 30.0


def report(*, quick: bool) -> None:
    starts, calls, concurrent = (10, 100, 20) if quick else (40, 500, 50)
    figures = sandbox.run(starts=starts, calls=calls, concurrent=concurrent)
    trip = sandbox.p50(figures.round_trip_ms)
    cold = figures.cold_start_ms
    met = "met" if trip <= ROUND_TRIP_TARGET_MS else "MISSED"
    print(
        "\nSandboxes (bubblewrap, the system's Python, the sandbox packages mounted)\n"
        f"  conditions: {os.cpu_count()} CPUs; default limits; one sandbox at a time for the"
        f" cold starts ({starts}) and the round trips ({calls} of `1 + 1` on a live kernel)\n"
        f"  cold start (started, its agent answering a command): p50 {sandbox.p50(cold):.1f}"
        f" ms, p99 {sandbox.p99(cold):.1f} ms\n"
        f"  run_code round trip on a live kernel: p50 {trip:.2f} ms, p99"
        f" {sandbox.p99(figures.round_trip_ms):.2f} ms (target <= {ROUND_TRIP_TARGET_MS:.0f} ms"
        f" over the code's own time: {met})\n"
        f"  memory per live sandbox with its Python session: {figures.pss_mb_per_sandbox:.1f} MB"
        " (PSS)\n"
        f"  {figures.concurrent} sandboxes at once, each running code: {figures.concurrent_errors}"
        f" errors, all answered in {figures.concurrent_wall_s:.2f} s"
    )
    record("sandbox: cold start p50", sandbox.p50(cold), "ms", "lower")
    record("sandbox: run_code round trip p50", trip, "ms", "lower")
    record("sandbox: PSS per live sandbox", figures.pss_mb_per_sandbox, "MB", "lower")
