"""`python -m bench [steps|gateway|guards|inputs|deltas|history|mcp|web|console|service|live|tail|
resume|subagents|a2a|isolation|startup|sandbox|peer|all] [--quick]`:
prints each figure with its conditions (`live` is the service's benchmark (b) alone; `tail`, the
completion latency of a burst of two-call tasks, also runs with `service`; `resume` starts two
instances and kills one, and runs alone)."""

import argparse
import logging
import os
import platform
from datetime import UTC, datetime
from importlib.metadata import version

from bench import (
    compare,
    conversation_history,
    gateway_latency,
    guard_overhead,
    input_check,
    output_delta,
    service_chain_read,
    service_isolation,
    service_live_chains,
    service_sse_latency,
    service_suite,
    service_tail,
    step_overhead,
)
from bench.results import record
from bench.service_report import (
    print_chain,
    print_live,
    print_sse,
    print_throughput,
    problems,
    verdict,
)

STEP_TARGET_MS = 0.5
STRATEGY_STEP_TARGET_MS = 1.0
PLAN_SPEED_UP_TARGET = 3.0
GATEWAY_TARGET_MS = 3.0
GUARD_P50_TARGET_MS = 1.0
MCP_ADDED_P50_TARGET_MS = 2.0
SUB_AGENT_TARGET_MS = 5.0
ISOLATION_P50_RATIO_TARGET = 2.0
ISOLATION_HEALTH_P99_TARGET_MS = 50.0


def main() -> None:
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__)
    parser.add_argument(
        "which",
        nargs="?",
        choices=[
            "steps",
            "strategies",
            "gateway",
            "guards",
            "inputs",
            "deltas",
            "history",
            "mcp",
            "web",
            "console",
            "service",
            "live",
            "tail",
            "resume",
            "subagents",
            "a2a",
            "isolation",
            "startup",
            "sandbox",
            "peer",
            "compare",
            "all",
        ],
        default="all",
    )
    parser.add_argument(
        "rest",
        nargs="*",
        metavar="BASE [PLAN ...]",
        help="compare: the base commit, then the plans to run on both sides"
        f" (default: {' '.join(compare.DEFAULT_PLANS)})",
    )
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    args = parser.parse_args()
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)  # per-deployment pricing notices
    print(
        f"OmniForge benchmarks · {datetime.now(UTC):%Y-%m-%d %H:%M} UTC · Python "
        f"{platform.python_version()} · {os.cpu_count()} CPUs · LiteLLM {version('litellm')}"
    )
    if args.which in ("steps", "all"):
        _steps(tasks=60 if args.quick else 300)
    if args.which in ("strategies", "all"):
        _strategies(tasks=30 if args.quick else 150)
    if args.which in ("gateway", "all"):
        _gateway(samples=400 if args.quick else 2000)
    if args.which in ("guards", "all"):
        _guards(calls=400 if args.quick else 2000)
    if args.which in ("inputs", "all"):
        _inputs(repeat=500 if args.quick else 2000)
    if args.which in ("deltas", "all"):
        _deltas(rounds=2 if args.quick else 5)
    if args.which in ("history", "all"):
        _history(samples=50 if args.quick else 300)
    if args.which in ("mcp", "all"):
        _mcp(samples=200 if args.quick else 1000)
    if args.which in ("web", "all"):
        _web(runs=30 if args.quick else 60)
    if args.which in ("console", "all"):
        _console(runs=5 if args.quick else 20)
    if args.which in ("service", "all"):
        _service(quick=args.quick)
    if args.which in ("tail", "service", "all"):
        _tail(rounds=1 if args.quick else 4)
    if args.which in ("subagents", "all"):
        _subagents(tasks=60 if args.quick else 400, rounds=4 if args.quick else 10)
    if args.which in ("a2a", "all"):
        _a2a(samples=50 if args.quick else 200, rounds=5 if args.quick else 10)
    if args.which in ("isolation", "all"):
        _isolation(baseline_tasks=20 if args.quick else 60)
    if args.which in ("startup", "all"):
        _startup(repetitions=2 if args.quick else 7)
    if args.which == "sandbox":
        from bench import sandbox_report  # needs root and bubblewrap: never part of `all`

        sandbox_report.report(quick=args.quick)
    if args.which == "compare":
        if not args.rest:
            parser.error("compare needs a base commit: scripts/bench compare BASE [PLAN ...]")
        plans = args.rest[1:] or list(compare.DEFAULT_PLANS)
        compare.run(args.rest[0], plans, quick=args.quick)
        return
    if args.which == "peer":
        _peer(quick=args.quick)
    if args.which == "resume":
        _resume(tasks=6 if args.quick else 20, delay_s=4.0 if args.quick else 10.0)
    if args.which == "live":
        print(
            f"\nService benchmark (b) alone: the app on uvicorn in its own process,"
            f" {service_suite.database_description()}, a fresh database; a fake LLM server in its"
            f" own process; load from aiohttp on uvloop; all on {os.cpu_count()} CPUs."
        )
        print_live(service_suite.run_live(quick=args.quick))


TOKEN_CPU_TARGET_S = 0.3
PEER_CLIENTS = 32


def _peer(quick: bool) -> None:
    from bench import peer

    rounds = peer.run(tasks=100 if quick else 1000, clients=PEER_CLIENTS, rounds=1 if quick else 2)
    peer.report(rounds, PEER_CLIENTS)


def _startup(repetitions: int) -> None:
    from bench import startup  # its own processes; nothing of the service in this one

    startup.report(startup.run(repetitions=repetitions), token_target_s=TOKEN_CPU_TARGET_S)


def _console(runs: int) -> None:
    from bench import console_load  # Playwright would weigh on every other figure's heap

    r = console_load.run(runs=runs)
    assets = ", ".join(f"{name} {size / 1024:.1f} KB" for name, size in r.asset_bytes.items())
    print(
        "\nWeb console first load in headless Chromium: navigation to a task's page -> its first"
        " chain step drawn\n"
        "  conditions: the service on uvicorn in its own process, Postgres 127.0.0.1; the system"
        " Chromium (headless) on the same 2 CPUs, over loopback (no network latency or"
        " bandwidth limit); signed in (credential in the tab's session storage); a task"
        " submitted just before each navigation, fake LLM answering at once; a fresh browser"
        f" context (empty cache) per run, {r.runs} runs after 1 warm-up, median; warm = the next"
        " task's page in the same context\n"
        f"  cold: first step drawn {r.median(r.cold, 'first_step_ms'):.0f} ms,"
        f" {r.median(r.cold, 'bytes') / 1024:.1f} KB transferred in"
        f" {r.median(r.cold, 'requests'):.0f} requests (headers included)\n"
        f"  warm: first step drawn {r.median(r.warm, 'first_step_ms'):.0f} ms,"
        f" {r.median(r.warm, 'bytes') / 1024:.1f} KB transferred\n"
        f"  one cold load, as transferred: {assets}"
    )


def _web(runs: int) -> None:
    from bench import web_fetch  # its HTTP stack would weigh on every other figure's heap

    r = web_fetch.run(runs=runs)
    print(
        f"\nweb_fetch of a {r.page_bytes / 2**20:g} MiB HTML page from a loopback server"
        " (allow-listed) through the whole executor: SSRF guard, pinned connection, streamed"
        f" download with {r.progress_reports} progress reports, HTML to Markdown in a worker"
        " thread, steps\n"
        "  conditions: `python -m http.server` in its own process on 127.0.0.1; article-like"
        f" HTML (headings, links, lists); {r.runs} sequential calls per kind after 3 warm-up"
        " calls; a long page is converted only as far as the text asked for needs"
    )
    for series in r.series:
        text = f", {series.chars:,} characters returned" if series.chars else ""
        print(
            f"  {series.label:<50} p50 {series.p(50):8.1f} ms  p95 {series.p(95):8.1f} ms"
            f"  {series.mb_per_s(r.page_bytes):6.1f} MB/s{text}"
        )


def _mcp(samples: int) -> None:
    from bench import mcp_call  # the MCP SDK would weigh on every other figure's heap

    r = mcp_call.run(samples=samples)
    added = r.added(50)
    print(
        "\nMCP tool call through the whole executor vs a raw `mcp` SDK call to the same server\n"
        "  conditions: the SDK's own MCP server (streamable HTTP, uvicorn) in its own process on"
        f" 127.0.0.1 answering `add` at once; one session kept open per side; {r.samples}"
        f" sequential calls per side interleaved in blocks after {mcp_call.WARM_UP} warm-up"
        f" calls each; our side opened {r.handshakes} session(s)\n"
        f"  raw SDK   p50 {r.raw(50):.3f} ms  p99 {r.raw(99):.3f} ms  CPU {r.raw_cpu_ms:.3f}"
        " ms/call\n"
        f"  executor  p50 {r.executor(50):.3f} ms  p99 {r.executor(99):.3f} ms"
        f"  CPU {r.executor_cpu_ms:.3f} ms/call\n"
        f"  added     p50 {added:.3f} ms (target <= {MCP_ADDED_P50_TARGET_MS:g} ms:"
        f" {verdict(added <= MCP_ADDED_P50_TARGET_MS)})  p99 {r.added(99):.3f} ms"
    )


def _inputs(repeat: int) -> None:
    print(
        "\nWhat the request input check adds per request (strict JSON parse and text check of the"
        " body; path, query and Last-Event-ID text)\n"
        "  conditions: in-process, fastest of 5 rounds; `plain` is json.loads, what parsed bodies"
        " before"
    )
    for figure in input_check.run(repeat=repeat):
        print(
            f"  {figure.label:<45} plain {figure.plain_us:9.1f} µs   checked"
            f" {figure.checked_us:9.1f} µs   added {figure.added_us:8.1f} µs"
        )


HISTORY_TARGET_MS = 5.0


def _history(samples: int) -> None:
    r = conversation_history.run(samples=samples)
    per_turn = conversation_history.median(r.per_turn_ms)
    cold = conversation_history.median(r.rebuild_ms)
    verdict = "met" if per_turn <= HISTORY_TARGET_MS else "MISSED"
    print(
        f"\nA conversation's history for its next turn ({r.turns} turns of a tool-using ReAct"
        f" run: 7 steps each; {r.messages} messages, {r.history_chars:,} characters)\n"
        f"  conditions: Postgres 127.0.0.1, in-process, {samples} samples each, median\n"
        f"  per turn (the process that served the previous turn reads only that one)"
        f" {per_turn:.2f} ms (target <= {HISTORY_TARGET_MS:g} ms: {verdict})\n"
        f"  whole ({r.turns} turns, a process new to the conversation) {cold:.2f} ms"
    )


def _deltas(rounds: int) -> None:
    r = output_delta.run(rounds=rounds)
    print(
        "\nServer CPU per streamed output delta (stream_output: fake LLM server streaming one"
        " word per chunk -> LiteLLM -> llm tool -> run channel -> SSE bytes to one subscriber)\n"
        f"  conditions: the service on uvicorn in its own process, Postgres 127.0.0.1; fake LLM"
        f" servers in their own processes answering {r.short_words} and {r.long_words} words;"
        f" {r.tasks} tasks of each kind, one at a time, each its own POST stream to `done`, kinds"
        f" interleaved over {r.rounds} rounds; {r.deltas_per_long_task} deltas received per"
        " long task\n"
        f"  server CPU per task: {r.short_words} words streamed {r.per_task_ms(r.short_cpu_s):.1f}"
        f" ms, {r.long_words} words streamed {r.per_task_ms(r.long_cpu_s):.1f} ms, not streamed"
        f" {r.per_task_ms(r.unstreamed_cpu_s):.1f} ms\n"
        f"  CPU per delta {r.cpu_us_per_delta:.0f} µs (over not streaming:"
        f" {r.streaming_us_per_delta:.0f} µs); of which the service's own part (stamp, event"
        f" JSON and frame, channel, one subscriber; in-process) {r.own_us:.1f} µs"
    )


def _steps(tasks: int) -> None:
    iterations = 10
    result = step_overhead.run(tasks=tasks, iterations=iterations)
    verdict = "met" if result.cpu_ms_per_step < STEP_TARGET_MS else "MISSED"
    record("steps: CPU per reasoning step", result.cpu_ms_per_step, "ms", "lower")
    print(
        f"\nFramework overhead per reasoning step (engine + executor + chain + events)\n"
        f"  conditions: ReAct agent, native tool calls, instant in-process model as the llm tool,"
        f" {tasks} tasks x {iterations} tool iterations = {result.steps} steps,"
        f" {result.events} events read\n"
        f"  CPU  {result.cpu_ms_per_step:.3f} ms/step   (target < {STEP_TARGET_MS} ms: {verdict})\n"
        f"  wall {result.wall_ms_per_step:.3f} ms/step"
    )


def _strategies(tasks: int) -> None:
    # Imported here: `compare` runs this tree's benchmark code in older trees too, whose
    # agents have no strategies to import.
    from bench import strategies

    costs, wall = strategies.run(tasks=tasks)
    base = next(cost for cost in costs if cost.kind == "direct")
    print(
        "\nStrategies: framework CPU per LLM call step, over a plain one-call task's\n"
        "  conditions: an instant in-process model as the llm tool answering each strategy's"
        f" requests; {tasks} tasks per kind, one at a time; tot breadth 3 depth 2 beam 2, mcts 6"
        " simulations, a plan of 4 independent reasoning steps"
    )
    for cost in costs:
        over = cost.cpu_ms_per_call - base.cpu_ms_per_call
        line = f"  {cost.kind:<7} {cost.cpu_ms_per_call:.3f} ms/call ({cost.llm_calls} calls)"
        if cost is not base:
            met = "met" if over <= STRATEGY_STEP_TARGET_MS else "MISSED"
            line += f"   over direct {over:+.3f} ms (target <= {STRATEGY_STEP_TARGET_MS} ms: {met})"
            record(f"strategies: {cost.kind} CPU per call over direct", over, "ms", "lower")
        print(line)
    met = "met" if wall.speed_up >= PLAN_SPEED_UP_TARGET else "MISSED"
    record("strategies: plan of 4 branches, speed-up", wall.speed_up, "x", "higher")
    print(
        f"\nPlan waves: steps whose model call answers after {wall.delay_s:.0f} s (fake server,"
        " LiteLLM's HTTP path), from the first step's start to the plan's end\n"
        f"  one branch {wall.one_branch_s:.2f} s, four branches {wall.four_branches_s:.2f} s,"
        f" the four one after another {wall.four_in_a_row_s:.2f} s\n"
        f"  parallel speed-up {wall.speed_up:.2f}x (target >= {PLAN_SPEED_UP_TARGET}x: {met})"
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


def _guards(calls: int) -> None:
    print(
        "\nGovernance guards added per LLM call (budget + model policy + tenant quotas)\n"
        "  conditions: llm-tool calls of ReAct conversations growing by two new messages per call"
        " to ~1,500 tokens over 10 calls, two tools offered; task budget on cost, tokens, LLM"
        " calls, steps and duration; model policy with wildcards and an output cap; quotas on"
        " LLM calls/min, tokens/min and /h,"
        f" cost/h and /day; before_call + after_call of the three guards, {calls} sequential"
        " calls after 200 warm-up; Redis 127.0.0.1:6379 on the same machine"
    )
    for result in guard_overhead.run(calls=calls):
        p50 = result.p(50)
        print(
            f"  [{result.backend}]  p50 {p50:.3f} ms (target < {GUARD_P50_TARGET_MS:g} ms:"
            f" {verdict(p50 < GUARD_P50_TARGET_MS)})  p99 {result.p(99):.3f} ms;"
            f" estimate of a wholly new prompt p50 {result.p(50, result.estimate_ms):.3f} ms"
        )


def _service(quick: bool) -> None:
    database = service_suite.database_description()
    shared = "one service shared by the four (quick mode)" if quick else "a fresh service for each"
    print(
        f"\nService benchmarks: the app on uvicorn (uvloop, httptools, one worker, access log off)"
        f" in its own process, {database}, a fresh database built by the migrations,"
        f" {shared}; fake OpenAI-compatible LLM servers in their own processes; load from"
        f" aiohttp on uvloop. Client, fake LLM, Postgres and service share {os.cpu_count()} CPUs."
    )

    def report(result: service_suite.Result) -> None:
        if isinstance(result, service_sse_latency.SseLatency):
            print_sse(result)
        elif isinstance(result, service_live_chains.LiveChains):
            print_live(result)
        elif isinstance(result, service_chain_read.ChainRead):
            print_chain(result)
        else:
            print_throughput(result)

    service_suite.run(quick, report)


def _tail(rounds: int) -> None:
    clients = 256
    r = service_tail.run(clients=clients, rounds=rounds)
    settings = ", ".join(f"{name}={value}" for name, value in r.settings.items())
    record("tail: completion p50", r.p(50), "ms", "lower")
    record("tail: completion p99", r.p(99), "ms", "lower")
    record("tail: throughput", r.tasks_per_s, "tasks/s", "higher")
    record("tail: service CPU", r.server_cpu_s / r.wall_s, "cores", "lower")
    print(
        f"\nCompletion latency of a burst of two-call tasks (submit -> `done` received)\n"
        f"  conditions: the service on uvicorn in its own process,"
        f" {service_suite.database_description()}, a fresh database; service settings:"
        f" {settings or 'none'} over the defaults {_defaults(service_tail.SETTINGS)};"
        f" {r.clients} clients, each submitting a task"
        f" (POST, tools [calculator]) and following its stream (GET, SSE) to done, {r.rounds}"
        f" round(s) back to back after one warm-up round; fake LLM in its own process answering"
        f" at once ({service_tail.DELAY_S:g} s): a calculator call, then 'ok' once the request"
        f" carries its result; 2 LLM calls, 1 tool call per task; client, fake LLM, Postgres"
        f" and service on the same 2 CPUs\n"
        f"    {len(r.completed)} completed: p50 {r.p(50):.0f} ms  p90 {r.p(90):.0f} ms"
        f"  p99 {r.p(99):.0f} ms  max {r.p(100):.0f} ms;  {r.tasks_per_s:.1f} tasks/s;"
        f" failures: {dict(r.failures) or 'none'}\n"
        f"    CPU over the {r.wall_s:.1f} s, in cores: service {r.server_cpu_s / r.wall_s:.2f},"
        f" its Postgres backends {r.postgres_cpu_s / r.wall_s:.2f},"
        f" client {r.client_cpu_s / r.wall_s:.2f},"
        f" whole machine {r.machine_cpu_s / r.wall_s:.2f} of {os.cpu_count()}\n"
        f"    phases, ms (p50 of all | p50 of the slowest 1% | max):"
    )
    for phase, p50, slow, worst in r.phase_table():
        print(f"      {phase:<12} {p50:8.1f} | {slow:8.1f} | {worst:8.1f}")


def _defaults(names: tuple[str, ...]) -> str:
    from app.config import Settings

    fields = Settings.model_fields

    def value(name: str) -> str:
        if name not in fields:
            return f"{name} (not a setting here)"
        given = os.environ.get(f"OMNIFORGE_{name.upper()}")
        return f"{name}={fields[name].default}" if given is None else f"{name}={given} (env)"

    return ", ".join(value(name) for name in names)


def _subagents(tasks: int, rounds: int) -> None:
    from bench import sub_agent_overhead as sub

    results = sub.run(tasks=tasks, rounds=rounds)
    print(
        "\nSub-agent call: the parent's tool call -> the child's task and chain stored and"
        " started -> its answer -> the parent's observation, in service CPU, its LLM call left"
        " out\n"
        f"  conditions: the service on uvicorn in its own process,"
        f" {service_suite.database_description()}, a fresh database; a scripted fake LLM in its"
        " own process answering at once (its CPU is not the service's); each task POSTed with"
        " Accept: text/event-stream and its stream read to done (the parent's stream relays"
        f" the child's events); {results[0].rounds} rounds, each a block of every workload"
        f" (order rotated), after {sub.WARM_UP} warm-up tasks each; client, fake LLM, Postgres"
        f" and service on the same {os.cpu_count()} CPUs\n"
        "  workloads: delegating = lead calls agent__worker, whose child task answers in one"
        " LLM call (3 LLM calls, 1 tool call, 2 tasks); three_calls = calculator, calculator,"
        " answer (3 LLM calls, 2 tool calls); pair = two calculator calls in one turn (2, 2);"
        " one_tool = one calculator call (2, 1)\n"
        "  sub-agent call = delegating - one_tool - one LLM call (three_calls - pair): what"
        " delegating adds over a plain tool call"
    )
    for r in results:
        added = r.added()
        print(f"  [{r.series['delegating'].tasks} tasks per workload, {r.concurrency} at a time]")
        for name, series in r.series.items():
            postgres = f"{series.postgres_ms:5.2f} ms/task" if r.postgres_counted else "n/a"
            print(
                f"    {name:<12} service CPU {series.cpu_ms:6.2f} ms/task   Postgres {postgres}"
                f"   latency p50 {series.p(50):6.1f} ms  p90 {series.p(90):6.1f} ms"
                f"   LLM calls {series.llm_calls}"
            )
        postgres = f"{r.added('postgres_ms'):+.2f} ms" if r.postgres_counted else "n/a"
        print(
            f"    one LLM call {r.llm_call():.2f} ms, one calculator call {r.tool_call():.2f} ms"
            " of service CPU\n"
            f"    sub-agent call over a plain tool call: service CPU {added:.2f} ms (target <="
            f" {SUB_AGENT_TARGET_MS:g} ms: {verdict(added <= SUB_AGENT_TARGET_MS)}), with its"
            f" own tool-call steps {added + r.tool_call():.2f} ms; Postgres backends {postgres};"
            f" latency p50 {r.added_latency_ms(50):+.1f} ms over three_calls\n"
            f"    child tasks stored {r.children}; failures: {r.failures[:3] or 'none'};"
            f" server stderr: {problems(r.server_problems)}; CPU over the {r.wall_s:.0f} s, in"
            f" cores: whole machine {r.machine_cpu_s / r.wall_s:.2f} of {os.cpu_count()},"
            f" service {r.service_cpu_s / r.wall_s:.2f}, fake LLM + client"
            f" {r.bench_cpu_s / r.wall_s:.2f}"
        )


def _isolation(baseline_tasks: int) -> None:
    print(
        "\nBulkheads: tenant B's simple tasks while tenant A uploads "
        f"{service_isolation.BOMBS} PDF bombs, runs tasks against a backtracking pattern and "
        f"floods {service_isolation.FLOOD:,} invalid requests\n"
        f"  conditions: the service on uvicorn in its own process,"
        f" {service_suite.database_description()}, a fresh database, default limits; fake LLM"
        " servers in processes of their own answering at once; B's tasks one at a time"
        f" ({baseline_tasks} for the baseline, as many as fit in the attack), /healthz probed"
        f" every {service_isolation.PROBE_EVERY_S * 1000:g} ms; client, fake LLMs, Postgres and"
        f" service on the same {os.cpu_count()} CPUs"
    )
    service_isolation.report(
        service_isolation.run(baseline_tasks),
        p50_ratio_target=ISOLATION_P50_RATIO_TARGET,
        health_p99_target_ms=ISOLATION_HEALTH_P99_TARGET_MS,
    )


def _a2a(samples: int, rounds: int) -> None:
    from bench import a2a_roundtrip  # the a2a SDK would weigh on every other figure's heap

    r = a2a_roundtrip.run(samples=samples, rounds=rounds)
    labels = {
        "rest_stream": "REST POST (Accept: event-stream) to done",
        "rest_follow": "REST POST 202, GET stream to done",
        "rest_conversation": "REST POST conversation, POST stream to done",
        "a2a_jsonrpc": "A2A SendMessage, JSON-RPC by httpx POST",
        "a2a_sdk": "A2A SendMessage, a2a-sdk client (JSON-RPC)",
    }
    print(
        "\nA2A SendMessage (blocking) vs REST for the same task: request sent -> finished"
        " answer held\n"
        f"  conditions: the service on uvicorn in its own process,"
        f" {service_suite.database_description()}, a fresh database; fake LLM in its own"
        " process answering 'ok' at once; agent `echo` without tools (1 LLM call per task);"
        " one keep-alive httpx client for all; A2A without context_id (the service opens a"
        f" conversation per message); {r.samples} sequential round trips per series in"
        f" {r.rounds} interleaved rounds after {a2a_roundtrip.WARM_UP} warm-up each; client,"
        f" fake LLM, Postgres and service on the same {os.cpu_count()} CPUs"
    )
    for name, series in r.series.items():
        print(
            f"  {labels[name]:<45} p50 {series.p(50):6.2f} ms  p90 {series.p(90):6.2f} ms"
            f"  p99 {series.p(99):6.2f} ms   service CPU {series.server_cpu_ms:5.2f} ms"
            f"  client CPU {series.client_cpu_ms:5.2f} ms"
        )
    for name in ("a2a_jsonrpc", "a2a_sdk"):
        print(
            f"  {name} over REST POST stream: p50 {r.added(name, 50):+.2f} ms  p90"
            f" {r.added(name, 90):+.2f} ms  p99 {r.added(name, 99):+.2f} ms; over REST with a"
            f" conversation: p50 {r.added(name, 50, 'rest_conversation'):+.2f} ms"
        )
    service_cpu_s = sum(series.server_cpu_s for series in r.series.values())
    print(
        f"  server stderr: {problems(r.server_problems)}; CPU over the {r.wall_s:.0f} s, in"
        f" cores: whole machine {r.machine_cpu_s / r.wall_s:.2f} of {os.cpu_count()}, service"
        f" {service_cpu_s / r.wall_s:.2f}"
    )


def _resume(tasks: int, delay_s: float) -> None:
    from bench import service_resume

    r = service_resume.run(tasks=tasks, delay_s=delay_s)
    print(
        f"\nResume latency: kill of the instance running the tasks -> first `task_status`"
        f" with `resumed: true` received on the other instance's stream\n"
        f"  conditions: two instances of the service (uvicorn, own processes) on one"
        f" {service_suite.database_description()} database; {r.tasks} tasks submitted to A (it"
        f" has room, so it runs them all; checked in the task rows), each in an LLM call that"
        f" the fake LLM holds {r.delay_s:g} s; every stream followed on B; runner heartbeat"
        f" {r.heartbeat_s:g} s (a lease check every heartbeat notices a dead pid on this host;"
        f" a runner silent for 3 heartbeats is presumed dead elsewhere), shutdown grace"
        f" {r.grace_s:g} s"
    )
    for round_ in r.rounds:
        print(
            f"  [{round_.signal}] resumed p50 {round_.p(50):.0f} ms  max {round_.p(100):.0f} ms"
            f" ({len(round_.resume_ms)} of {r.tasks} resumed); completed"
            f" {round_.completed}/{r.tasks}, kill -> all done {round_.all_done_s:.1f} s;"
            f" outcomes: {dict(round_.outcomes)}"
        )


if __name__ == "__main__":
    main()
