"""`cache_ttl_seconds` through the executor: an identical call (same tenant, tool, arguments)
within the TTL is answered from the cache (`cached: true`, no cost, the tool not run again);
another tenant, other arguments or an expired entry make a real call; and guards still judge a
call the cache could answer."""

from decimal import Decimal
from typing import Any

from app.chain import ErrorCode, ReasoningChain, ToolType
from app.tools.base import BaseTool
from app.tools.builtin.json_query import JsonQueryTool
from app.tools.cache import ToolResultCache
from app.tools.executor import ToolExecutor
from app.tools.models import ToolCallContext, ToolDefinition, ToolOutput, ToolPermissions
from app.tools.permissions import ToolPermissionGuard
from app.tools.recording import InMemoryCostRecorder
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult
from tests.factories import context_for

DOCUMENT = {"items": [{"name": "a", "price": 3}, {"name": "b", "price": 12}]}
QUERY = {"data": DOCUMENT, "query": "$.items[?(@.price > 5)].name"}


class CountingJsonQuery(JsonQueryTool):
    """json_query that counts how often it really runs; `required_roles` optional."""

    def __init__(self, required_roles: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.executions = 0
        if required_roles:
            self._definition = self._definition.model_copy(
                update={"permissions": ToolPermissions(required_roles=required_roles)}
            )

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        self.executions += 1
        return await super().execute(arguments, context)


class PricedLookup(BaseTool):
    """A paid lookup (tokens and dollars per call) that may be cached for a minute."""

    def __init__(self) -> None:
        self.executions = 0
        self._definition = ToolDefinition(
            name="priced_lookup",
            type=ToolType.EXTERNAL,
            description="looks up a term",
            parameters={"type": "object", "properties": {"term": {"type": "string"}}},
            cache_ttl_seconds=60,
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        self.executions += 1
        return ToolOutput(
            {"term": arguments["term"], "meaning": "…"},
            model="lookup-1",
            input_tokens=12,
            output_tokens=30,
            cost_usd=Decimal("0.004"),
        )


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Harness:
    def __init__(self, *tools: BaseTool, guards: bool = False) -> None:
        self.clock = Clock()
        self.recorder = InMemoryCostRecorder()
        self.executor = ToolExecutor(
            ToolRegistry(list(tools)),
            guards=[ToolPermissionGuard()] if guards else [],
            recorder=self.recorder,
            cache=ToolResultCache(clock=self.clock),
        )

    async def call(
        self, name: str, arguments: dict[str, Any], *, tenant: str = "acme", **context: Any
    ) -> ToolResult:
        chain = ReasoningChain(task_id="t", agent_id="a")
        call_context = context_for(chain, tenant_id=tenant, **context)
        return await self.executor.execute(chain, call_context, name, arguments)


async def test_an_identical_call_within_the_ttl_is_cached_and_not_run_again() -> None:
    tool = CountingJsonQuery()
    harness = Harness(tool)

    first = await harness.call("json_query", QUERY)
    harness.clock.now += 299
    # The same arguments in another order are the same call.
    second = await harness.call("json_query", dict(reversed(QUERY.items())))

    assert tool.executions == 1
    assert first.value == second.value == {"query": QUERY["query"], "count": 1, "results": ["b"]}
    assert (first.info.cached, second.info.cached) == (False, True)
    assert second.info.result == first.info.result
    assert second.info.cost_usd is None
    assert second.info.attempts == 0


async def test_another_tenant_or_other_arguments_make_a_real_call() -> None:
    tool = CountingJsonQuery()
    harness = Harness(tool)

    await harness.call("json_query", QUERY)
    other_tenant = await harness.call("json_query", QUERY, tenant="globex")
    other_query = await harness.call("json_query", {**QUERY, "query": "$.items[*].name"})
    other_data = await harness.call("json_query", {**QUERY, "data": {"items": []}})

    assert tool.executions == 4
    assert [r.info.cached for r in (other_tenant, other_query, other_data)] == [False] * 3
    assert other_query.value["results"] == ["a", "b"]
    assert other_data.value["results"] == []


async def test_after_the_ttl_the_call_is_real_again_and_cached_anew() -> None:
    tool = CountingJsonQuery()
    harness = Harness(tool)

    await harness.call("json_query", QUERY)
    harness.clock.now += 300  # json_query's TTL, to the second
    expired = await harness.call("json_query", QUERY)
    harness.clock.now += 1
    cached_again = await harness.call("json_query", QUERY)

    assert tool.executions == 2
    assert (expired.info.cached, cached_again.info.cached) == (False, True)


async def test_a_failed_call_is_not_cached() -> None:
    tool = CountingJsonQuery()
    harness = Harness(tool)
    bad = {"data": "not json", "query": "$"}

    results = [await harness.call("json_query", bad) for _ in range(2)]

    assert tool.executions == 2
    assert [r.error_code for r in results] == [ErrorCode.INVALID_ARGUMENTS] * 2


async def test_a_cached_call_costs_nothing() -> None:
    tool = PricedLookup()
    harness = Harness(tool)

    paid = await harness.call("priced_lookup", {"term": "idempotent"})
    free = await harness.call("priced_lookup", {"term": "idempotent"})

    assert tool.executions == 1
    assert (paid.info.cost_usd, paid.info.total_tokens) == (Decimal("0.004"), 42)
    assert free.info.cached is True
    assert (free.info.cost_usd, free.info.total_tokens, free.info.model) == (None, None, None)
    assert [record.step_id for record in harness.recorder.records] == [paid.result_step.id]
    assert harness.recorder.total_usd() == Decimal("0.004")


async def test_guards_judge_a_call_the_cache_could_answer() -> None:
    tool = CountingJsonQuery(required_roles=("analyst",))
    harness = Harness(tool, guards=True)

    allowed = await harness.call("json_query", QUERY, roles=frozenset({"analyst"}))
    refused = await harness.call("json_query", QUERY, roles=frozenset({"viewer"}))
    cached = await harness.call("json_query", QUERY, roles=frozenset({"analyst"}))

    assert tool.executions == 1
    assert allowed.success
    assert cached.info.cached is True
    assert not refused.success
    assert refused.error_code is ErrorCode.PERMISSION_DENIED
    assert refused.info.cached is False
    assert refused.value is None
