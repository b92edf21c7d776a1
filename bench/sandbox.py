"""`scripts/bench sandbox`: real bubblewrap sandboxes on this host. A cold start (the process
tree started, its agent answering), its p50/p99; a `run_code` round trip on a live kernel
(`1 + 1`, whose own time is nil), p50/p99; memory per live sandbox with its Python session
started (the proportional set size of its processes: shared pages counted once across them);
and `concurrent` sandboxes started at once, each running code, with the errors counted."""

import asyncio
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from app.sandbox import LiveSandbox, SandboxHost, SandboxLimits, SandboxPool
from app.sandbox.procs import processes_of

ROOT = Path(__file__).resolve().parent.parent
FIRST_UID = 3_500_000  # a range of its own: the test suite's sandboxes never meet it


@dataclass(frozen=True, slots=True)
class SandboxFigures:
    cold_start_ms: list[float]
    round_trip_ms: list[float]
    pss_mb_per_sandbox: float
    concurrent: int
    concurrent_errors: int
    concurrent_wall_s: float


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _pss_mb(uid: int) -> float:
    total_kb = 0
    for pid in processes_of(uid):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as rollup:
                for line in rollup:
                    if line.startswith("Pss:"):
                        total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb / 1024


async def _measure(starts: int, calls: int, concurrent: int) -> SandboxFigures:
    host = SandboxHost(packages=ROOT / ".sandbox" / "packages", first_uid=FIRST_UID)
    host.check()
    limits = SandboxLimits()
    cold: list[float] = []
    for index in range(starts):
        sandbox = LiveSandbox(host, limits, FIRST_UID + index % 8)
        began = time.perf_counter()
        await sandbox.start()
        await sandbox.run(["true"])
        cold.append((time.perf_counter() - began) * 1000)
        await sandbox.close()
    sandbox = LiveSandbox(host, limits, FIRST_UID)
    await sandbox.start()
    await sandbox.python("1 + 1")  # the kernel started
    trips = []
    for _ in range(calls):
        began = time.perf_counter()
        await sandbox.python("1 + 1")
        trips.append((time.perf_counter() - began) * 1000)
    await sandbox.close()
    pool = SandboxPool(
        SandboxHost(packages=host.packages, first_uid=FIRST_UID + 100, uids=concurrent + 8),
        max_live=concurrent,
    )
    errors = 0

    async def one(index: int) -> LiveSandbox | None:
        nonlocal errors
        try:
            box, _ = await pool.get(f"bench-{index}", limits, owner="bench")
            answer = await box.python(f"sum(range({index}))")
            if answer.value != str(sum(range(index))):
                errors += 1
            return box
        except Exception:
            errors += 1
            return None

    began = time.perf_counter()
    boxes = await asyncio.gather(*(one(index) for index in range(concurrent)))
    wall = time.perf_counter() - began
    live = [box for box in boxes if box is not None]
    pss = statistics.mean(_pss_mb(box.uid) for box in live) if live else float("nan")
    await pool.close()
    return SandboxFigures(cold, trips, pss, concurrent, errors, wall)


def run(*, starts: int, calls: int, concurrent: int) -> SandboxFigures:
    return asyncio.run(_measure(starts, calls, concurrent))


def p50(values: list[float]) -> float:
    return _percentile(values, 0.5)


def p99(values: list[float]) -> float:
    return _percentile(values, 0.99)
