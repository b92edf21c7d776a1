"""How the service benchmarks' figures are printed (with their targets) and recorded for
`scripts/bench compare`."""

from bench import (
    service_chain_read,
    service_live_chains,
    service_sse_latency,
    service_throughput,
)
from bench.results import record

SSE_P50_TARGET_MS = 5.0
SSE_P99_TARGET_MS = 50.0
LIVE_CHAINS_TARGET = 10_000
CHAIN_READ_P50_TARGET_MS = 50.0


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def problems(lines: list[str]) -> str:
    if not lines:
        return "none"
    return f"{len(lines)} line(s), first: {lines[0][:160]}"


def print_sse(r: service_sse_latency.SseLatency) -> None:
    p50, p99 = r.p(50), r.p(99)
    record("(a) SSE delivery p50", p50, "ms", "lower")
    record("(a) SSE delivery p99", p99, "ms", "lower")
    print(
        f"\n(a) SSE delivery latency, step created -> client received\n"
        f"  conditions: {r.tasks} tasks submitted at {r.rate:g}/s (open loop), each followed by"
        f" {r.subscribers} subscribers (GET .../events); fake LLM answers after {r.delay_s:g} s,"
        f" 1 LLM call and 3 steps per task; steady state {r.rate * r.delay_s:g} live tasks x"
        f" {r.subscribers} = {r.target_streams} streams (peak {r.peak_streams} open);"
        f" reasoning_step event data {r.step_event_bytes:.0f} B on average; each batch of"
        f" events is committed to Postgres before it is published\n"
        f"  steady state ({r.window_s:.1f} s with >= 90% of the streams open):"
        f" {len(r.latencies_ms)} step deliveries, {r.event_rate:.0f} events/s received\n"
        f"    p50 {p50:.1f} ms (target <= {SSE_P50_TARGET_MS:g} ms:"
        f" {verdict(p50 <= SSE_P50_TARGET_MS)})  p90 {r.p(90):.1f} ms"
        f"  p99 {p99:.1f} ms (target <= {SSE_P99_TARGET_MS:g} ms:"
        f" {verdict(p99 <= SSE_P99_TARGET_MS)})  max {r.p(100):.1f} ms\n"
        f"  whole run: {len(r.all_latencies_ms)} step deliveries, p50 {r.p(50, window=False):.1f}"
        f" ms, p99 {r.p(99, window=False):.1f} ms; {r.replayed_steps} steps created before their"
        f" stream opened (replays, not counted); server CPU {r.server_utilisation:.0%} of a core;"
        f" failures: {r.failures or 'none'}"
    )


def print_live(r: service_live_chains.LiveChains) -> None:
    met = r.peak_live >= LIVE_CHAINS_TARGET and r.errors == 0
    record("(b) peak live chains", r.peak_live, "chains", "higher")
    record("(b) RSS per live chain", r.rss_per_chain_kb, "KB", "lower")
    record("(b) loop lag p99 on the plateau", r.lag_ms(99), "ms", "lower")
    plateau = r.plateau()
    held = f"{plateau[1].at - plateau[0].at:.0f} s" if plateau else "none"
    settings = ", ".join(f"{name}={value}" for name, value in r.settings.items())
    print(
        f"\n(b) Concurrent live chains per instance\n"
        f"  conditions: {r.tasks} tasks POSTed as fast as accepted ({r.concurrency} concurrent"
        f" POSTs, ~45 B bodies), then each stream read to done; fake LLM answers each call after"
        f" {r.delay_s:g} s; 1 LLM call and 3 steps per task; live = from the stored created_at to"
        f" finished_at; service settings: {settings or 'defaults'}\n"
        f"  accepted {r.submit_rate:.0f} tasks/s ({r.submit_s:.1f} s, server at"
        f" {r.submit_utilisation:.0%} of a core), all done after {r.wall_s:.1f} s;"
        f" outcomes: {r.outcomes}\n"
        f"    peak live chains {r.peak_live} (target >= {LIVE_CHAINS_TARGET:,} with no error:"
        f" {verdict(met)}); errors {r.errors}; peak active runs {r.peak_active_runs}; peak LLM"
        f" calls in flight {r.peak_llm_in_flight} ({r.llm_calls} calls,"
        f" {r.llm_calls - r.tasks:+d} over one per task); server file descriptors at most"
        f" {r.peak_open_files}\n"
        f"    not completed: {r.failure_reasons or 'none'}\n"
        f"    server RSS {r.rss_before_mb:.0f} MB before, {r.rss_peak_mb:.0f} MB at peak ->"
        f" {r.rss_per_chain_kb:.0f} KB per live chain\n"
        f"    server event-loop lag (its /metrics histogram, 100-ms timer) on the plateau"
        f" (>= {service_live_chains.PLATEAU_SHARE:.0%} of peak active runs, {held},"
        f" {r.lag_samples()} samples): p50 {r.lag_ms(50):.1f} ms, p99 {r.lag_ms(99):.1f} ms;"
        f" while submitting p50 {r.lag_ms(50, 'submit'):.1f} ms, p99"
        f" {r.lag_ms(99, 'submit'):.1f} ms; whole run p50 {r.lag_ms(50, 'whole'):.1f} ms,"
        f" p99 {r.lag_ms(99, 'whole'):.1f} ms\n"
        f"  server stderr: {problems(r.server_problems)}"
    )
    for problem, count in r.problem_counts().most_common(5):
        print(f"    x{count}: {problem[:160]}")


def print_chain(r: service_chain_read.ChainRead) -> None:
    p50 = r.p(50)
    record("(c) 1,000-step chain read p50", p50, "ms", "lower")
    record("(c) server CPU per chain read", r.server_cpu_ms_per_request, "ms", "lower")
    print(
        f"\n(c) GET of a {r.steps:,}-step chain from Postgres (GET /api/v1/chains/{{id}})\n"
        f"  conditions: chain written through RunRecorder + RunWrites (ReAct iterations: LLM call"
        f" and result, thought, calculator call and result), steps {r.step_bytes_mean:.0f} B on"
        f" average, response {r.response_bytes / 1024:.0f} KB; {r.requests} sequential GETs on"
        f" one keep-alive connection after 10 warm-up GETs\n"
        f"    p50 {p50:.1f} ms (target <= {CHAIN_READ_P50_TARGET_MS:g} ms:"
        f" {verdict(p50 <= CHAIN_READ_P50_TARGET_MS)})  p90 {r.p(90):.1f} ms"
        f"  p99 {r.p(99):.1f} ms  server CPU {r.server_cpu_ms_per_request:.1f} ms/request"
    )


def print_throughput(r: service_throughput.Throughput) -> None:
    record("(d) throughput", r.tasks_per_s, "tasks/s", "higher")
    record("(d) server CPU per task", r.server_cpu_ms_per_task, "ms", "lower")
    print(
        f"\n(d) End-to-end throughput through the whole service\n"
        f"  conditions: {r.tasks} tasks by {r.concurrency} concurrent clients, each POSTs a task"
        f" (~45 B body) and follows its stream (GET, SSE) to done; fake LLM answers at once;"
        f" 1 LLM call and 3 steps (~7 events) per task\n"
        f"    {r.tasks_per_s:.1f} tasks/s  {r.llm_calls_per_cpu_s:.1f} LLM calls per server"
        f" CPU-second ({r.server_cpu_ms_per_task:.1f} ms CPU/task, server at"
        f" {r.server_utilisation:.0%} of a core)  (no target set)\n"
        f"  completed {r.completed}, failed {r.failures}, LLM calls {r.llm_calls}; client CPU"
        f" {r.client_cpu_s:.1f} s; server stderr lines: {r.server_problems}"
    )
