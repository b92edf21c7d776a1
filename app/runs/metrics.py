"""Prometheus metrics of this process's runs, fed from the events runs emit.

Each app has its own registry (never the global one), so several apps in one process (tests)
do not share counters. Money is counted exactly in the database; here it is a float, converted
once per call, for dashboards.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from app.chain import (
    ChainCompletedEvent,
    ChainEvent,
    ChainFailedEvent,
    DoneEvent,
    ErrorCode,
    ReasoningStepEvent,
    ToolType,
)

RUN_DURATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


@dataclass(slots=True)
class RunLabels:
    """What the metrics of one run need to remember between its events."""

    tenant_id: str
    model: str
    started: float = field(default_factory=time.monotonic)


class RunMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.spend = Counter(
            "omniforge_spend_usd",
            "Spend of priced calls in USD: each call's exact Decimal cost converted once to float"
            " when counted (bill from the cost reports, which are exact)",
            ["tenant", "model"],
            registry=registry,
        )
        self.tokens = Counter(
            "omniforge_tokens",
            "Tokens of calls that reported usage",
            ["tenant", "model", "direction"],
            registry=registry,
        )
        self.llm_calls = Counter(
            "omniforge_llm_calls",
            "LLM calls by outcome",
            ["tenant", "model", "outcome"],
            registry=registry,
        )
        self.tool_calls = Counter(
            "omniforge_tool_calls",
            "Tool calls (LLM calls included) by tool type and outcome",
            ["tenant", "tool_type", "outcome"],
            registry=registry,
        )
        self.rate_limited = Counter(
            "omniforge_rate_limit_refusals",
            "Refusals by a tenant limit: submissions answered 429, and runs ended rate_limited",
            ["tenant", "limit", "where"],
            registry=registry,
        )
        self.budget_stops = Counter(
            "omniforge_budget_stops",
            "Runs ended budget_exceeded, by the budget that stopped them",
            ["tenant", "model", "limit"],
            registry=registry,
        )
        self.incomplete_runs = Counter(
            "omniforge_incomplete_runs",
            "Runs ended incomplete: a limit stopped them and they answered from what they had "
            "(on_limit: answer), by that limit",
            ["tenant", "model", "stop_reason"],
            registry=registry,
        )
        self.run_duration = Histogram(
            "omniforge_run_duration_seconds",
            "Time from submission to the end of a run",
            ["final_state"],
            buckets=RUN_DURATION_BUCKETS,
            registry=registry,
        )
        self.storage_retries = Counter(
            "omniforge_storage_retries",
            "Group writes tried again after a failure a retry can cure (connection, "
            "serialization, deadlock)",
            registry=registry,
        )
        self.storage_refused = Counter(
            "omniforge_storage_refused",
            "Writes the database refused for good: a run's events (the run is then ended "
            "failed/internal_error) or a request's audit rows",
            ["what"],
            registry=registry,
        )
        self.audit_rows_dropped = Counter(
            "omniforge_audit_rows_dropped",
            "Audit rows no request waited for that could not be stored (each also logged as an "
            "error)",
            registry=registry,
        )
        self.calls_cut = Counter(
            "omniforge_calls_cut",
            "Calls (model and tool) whose results a run of this process could not store, so "
            "that the next run of their task makes them again: cut by the shutdown grace "
            "(`shutdown`), a store outage past its limit (`outage`), or a run that lost its task "
            "to another instance (`lost`)",
            ["reason"],
            registry=registry,
        )
        self.active_runs = Gauge(
            "omniforge_active_runs", "Runs live in this process", registry=registry
        )
        self.open_streams = Gauge(
            "omniforge_open_streams", "SSE streams open on this process", registry=registry
        )
        # The labelled series counted per step, each kept once made: `labels()` checks its
        # values and takes the metric's lock on every call.
        self._series: dict[tuple[Counter, tuple[str, ...]], Counter] = {}

    def _counted(self, metric: Counter, *values: str) -> Counter:
        series = self._series.get((metric, values))
        if series is None:
            series = self._series[(metric, values)] = metric.labels(*values)
        return series

    def count_active_runs(self, active: Callable[[], int]) -> None:
        self.active_runs.set_function(lambda: float(active()))

    def observe(self, run: RunLabels, events: Sequence[ChainEvent]) -> None:
        for event in events:
            if isinstance(event, ReasoningStepEvent):
                self._step(run, event)
            elif isinstance(event, ChainFailedEvent):
                limit = str(event.details.get("limit", "unknown"))
                if event.error_code is ErrorCode.RATE_LIMITED:
                    self.rate_limited.labels(run.tenant_id, limit, "run").inc()
                elif event.error_code is ErrorCode.BUDGET_EXCEEDED:
                    self.budget_stops.labels(run.tenant_id, run.model, limit).inc()
            elif isinstance(event, ChainCompletedEvent):
                if event.stop_reason is not None:
                    self.incomplete_runs.labels(run.tenant_id, run.model, event.stop_reason).inc()
            elif isinstance(event, DoneEvent):
                self.run_duration.labels(event.final_state.value).observe(
                    time.monotonic() - run.started
                )

    def submission_refused(self, tenant_id: str, limit: str) -> None:
        self.rate_limited.labels(tenant_id, limit, "submission").inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def _step(self, run: RunLabels, event: ReasoningStepEvent) -> None:
        result = event.step.tool_result
        if result is None:
            return
        tool_type = result.tool_type or ToolType.CUSTOM
        outcome = "success" if result.success else "failure"
        tenant = run.tenant_id
        self._counted(self.tool_calls, tenant, tool_type.value, outcome).inc()
        model = result.model or run.model
        if tool_type is ToolType.LLM:
            self._counted(self.llm_calls, tenant, model, outcome).inc()
        if result.input_tokens:
            self._counted(self.tokens, tenant, model, "input").inc(result.input_tokens)
        if result.output_tokens:
            self._counted(self.tokens, tenant, model, "output").inc(result.output_tokens)
        if result.cost_usd:
            self._counted(self.spend, tenant, model).inc(float(result.cost_usd))
