"""`python -m bench [steps|gateway|all] [--quick]`: prints each figure with its conditions."""

import argparse
import logging
import os
import platform
from datetime import UTC, datetime
from importlib.metadata import version

from bench import gateway_latency, step_overhead

STEP_TARGET_MS = 0.5
GATEWAY_TARGET_MS = 3.0


def main() -> None:
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__)
    parser.add_argument("which", nargs="?", choices=["steps", "gateway", "all"], default="all")
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    args = parser.parse_args()
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)  # per-deployment pricing notices
    print(
        f"OmniForge benchmarks · {datetime.now(UTC):%Y-%m-%d %H:%M} UTC · Python "
        f"{platform.python_version()} · {os.cpu_count()} CPUs · LiteLLM {version('litellm')}"
    )
    if args.which in ("steps", "all"):
        _steps(tasks=60 if args.quick else 300)
    if args.which in ("gateway", "all"):
        _gateway(samples=400 if args.quick else 2000)


def _steps(tasks: int) -> None:
    iterations = 10
    result = step_overhead.run(tasks=tasks, iterations=iterations)
    verdict = "met" if result.cpu_ms_per_step < STEP_TARGET_MS else "MISSED"
    print(
        f"\nFramework overhead per reasoning step (engine + executor + chain + events)\n"
        f"  conditions: ReAct agent, native tool calls, instant in-process model as the llm tool,"
        f" {tasks} tasks x {iterations} tool iterations = {result.steps} steps,"
        f" {result.events} events read\n"
        f"  CPU  {result.cpu_ms_per_step:.3f} ms/step   (target < {STEP_TARGET_MS} ms: {verdict})\n"
        f"  wall {result.wall_ms_per_step:.3f} ms/step"
    )


def _gateway(samples: int) -> None:
    print(
        "\nLLM gateway added latency over raw httpx to the same OpenAI-compatible server\n"
        f"  conditions: fake server in its own process answering at once, {samples} sequential"
        " calls per client interleaved in 10 blocks, 200 warm-up calls each, one priced"
        " deployment, no fallback"
    )
    for label, openai_sdk in (("default", False), ("llm_openai_sdk=true", True)):
        result = gateway_latency.run(samples=samples, openai_sdk=openai_sdk)
        verdict = "met" if result.added(50) < GATEWAY_TARGET_MS else "MISSED"
        target = f" (target < {GATEWAY_TARGET_MS} ms: {verdict})" if not openai_sdk else ""
        print(
            f"  [{label}]\n"
            f"    raw httpx  p50 {result.raw(50):.3f} ms  p99 {result.raw(99):.3f} ms\n"
            f"    gateway    p50 {result.gateway(50):.3f} ms  p99 {result.gateway(99):.3f} ms"
            f"  CPU {result.gateway_cpu_ms:.3f} ms/call\n"
            f"    added      p50 {result.added(50):.3f} ms{target}  p99 {result.added(99):.3f} ms"
        )


if __name__ == "__main__":
    main()
