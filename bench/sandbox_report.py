"""What `scripts/bench sandbox` prints, against the targets of the sandbox work."""

import os

from bench import sandbox, sandbox_isolation
from bench.results import record
from bench.service_harness import percentile

ROUND_TRIP_TARGET_MS = 30.0
ISOLATION_RATIO_TARGET = 2.0


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

    isolation = sandbox_isolation.run(tasks=20 if quick else 60)
    met = "met" if isolation.ratio <= ISOLATION_RATIO_TARGET else "MISSED"
    print(
        "\nSandbox abuse: tenant B's simple tasks alone, then while tenant A's agents run"
        f" bombs in sandboxes ({sandbox_isolation.ATTACKERS_PER_BOMB} of each at a time)\n"
        f"  conditions: Postgres; the service and the fake model servers in processes of"
        f" their own on {os.cpu_count()} CPUs; {sandbox_isolation.SETTINGS}\n"
        f"  tenant B task p50: alone {percentile(isolation.baseline_ms, 50):.1f} ms"
        f" ({len(isolation.baseline_ms)} tasks), under the bombs"
        f" {percentile(isolation.attack_ms, 50):.1f} ms ({len(isolation.attack_ms)} tasks, p90"
        f" {percentile(isolation.attack_ms, 90):.1f} ms): {isolation.ratio:.2f}x (target <="
        f" {ISOLATION_RATIO_TARGET:g}x: {met}); B failures: {len(isolation.b_failures)}\n"
        f"  how the bomb calls ended (the limit that stopped each): {dict(isolation.outcomes)}"
    )
    record("sandbox: tenant B p50 under sandbox bombs, ratio", isolation.ratio, "x", "lower")
