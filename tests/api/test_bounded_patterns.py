"""Patterns users write run bounded: an agent whose `response_format` has a backtracking
`pattern` has its answers checked off the event loop within a time budget (the service goes
on answering meanwhile, the answer fails the check with a clear reason), and a pattern the
bounded engine refuses is refused when the agent is defined, naming the field."""

import asyncio
import json
import time
from typing import Any

from app.tools.patterns import CHECK_BUDGET_S, MAX_PATTERN_CHARS
from tests.api.helpers import assert_invalid, define_agent, stream, submit
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service

# Backtracking without end in every engine that backtracks. (`^(a+)+$`, the classic, is
# recognised by the `regex` engine and fails at once.)
BACKTRACKING: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "pattern": "^(a|a)+$"}},
    "required": ["code"],
}
# 27 letters and one that breaks the match: Python's `re` needs seconds to give up on it.
EVIL_ANSWER = json.dumps({"code": "a" * 27 + "!"})


async def test_a_backtracking_pattern_neither_freezes_the_service_nor_passes(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "picky", response_format=BACKTRACKING)
    answers = 1 + service.settings.output_retries
    service.fake_llm.script(MODEL, *[Reply.text(EVIL_ANSWER) for _ in range(answers)])
    health_ms: list[float] = []

    async def probe(done: asyncio.Event) -> None:
        async with service.client() as client:
            while not done.is_set():
                started = time.perf_counter()
                response = await client.get("/healthz")
                health_ms.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 200

    done = asyncio.Event()
    prober = asyncio.create_task(probe(done))
    started = time.perf_counter()
    async with service.client(tenant) as client:
        accepted = await submit(client, input="Give me the code", agent="picky")
        events = await stream(client, accepted["task_id"])
    elapsed = time.perf_counter() - started
    done.set()
    await prober

    [failed] = [e.json for e in events if e.event == "chain_failed"]
    assert failed["error_code"] == "invalid_output"
    assert failed["details"]["attempts"] == answers
    [reason, *_] = failed["details"]["errors"]
    assert "took longer than" in reason, reason
    assert "'^(a|a)+$'" in reason
    # Each answer checked within its budget (Python's `re` took 30 s for one here), with
    # room for a busy machine.
    assert elapsed < answers * CHECK_BUDGET_S * 4 + 10
    # The loop answered all along: many probes, none held up by the checks (Python's `re`
    # held it for the whole 30 s of each), with room for a busy machine's own pauses.
    assert len(health_ms) >= 5
    assert sorted(health_ms)[len(health_ms) * 9 // 10] < 100, sorted(health_ms)[-5:]
    assert max(health_ms) < 1000, sorted(health_ms)[-5:]


async def test_a_matching_answer_passes_its_pattern(service: Service, tenant: str) -> None:
    await define_agent(service, tenant, "picky", response_format=BACKTRACKING)
    service.fake_llm.script(MODEL, Reply.text(json.dumps({"code": "aaaa"})))
    async with service.client(tenant) as client:
        accepted = await submit(client, input="Give me the code", agent="picky")
        await stream(client, accepted["task_id"])
        task = (await client.get(f"/api/v1/tasks/{accepted['task_id']}")).json()
    assert task["status"] == "completed"
    assert task["output"] == {"code": "aaaa"}


async def test_patterns_the_bounded_engine_refuses_are_refused_at_definition(
    service: Service, tenant: str
) -> None:
    too_long = "a" * (MAX_PATTERN_CHARS + 1)
    cases = [
        {"type": "string", "pattern": "(unclosed"},
        {"type": "object", "properties": {"x": {"type": "string", "pattern": too_long}}},
        {"type": "object", "patternProperties": {"[z-a]": {"type": "string"}}},
        {
            "type": "object",
            "patternProperties": {"^x": {"type": "string"}},
            "unevaluatedProperties": False,
        },
    ]
    messages: list[str] = []
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        for index, schema in enumerate(cases):
            response = await admin.post(
                "/api/v1/agents", json={"name": f"refused-{index}", "response_format": schema}
            )
            body = assert_invalid(response, "body.response_format")
            [error] = [e for e in body["errors"] if e["field"] == "body.response_format"]
            messages.append(error["message"])
    assert "not a usable JSON Schema" in messages[0]
    assert f"at most {MAX_PATTERN_CHARS} characters" in messages[1]
    assert "properties/x/pattern" in messages[1]
    assert "bad character range" in messages[2]
    assert "cannot be combined with `unevaluatedProperties`" in messages[3]
