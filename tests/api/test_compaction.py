"""Context compaction: a conversation that outgrows its model's input window is summarised by
a recorded, billed LLM call; no request ever passes the window; one that cannot fit fails
`context_window` before any call."""

from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.agents.compaction import SUMMARY_HEADER, SUMMARY_PROMPT
from app.llm.litellm_env import litellm
from tests.api.helpers import cost_of, stream, submit
from tests.factories import fake_deployment
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.service import INPUT_PRICE, OUTPUT_PRICE, Service, service_with_model

SMALL = "small-window"
WINDOW = 600
TURNS = 6


@pytest.fixture
async def small_service(
    database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> AsyncIterator[Service]:
    """A service whose model `small-window` takes 600 prompt tokens."""
    small = fake_deployment(
        fake_llm,
        SMALL,
        input_cost=INPUT_PRICE,
        output_cost=OUTPUT_PRICE,
        native_tools=True,
        max_input_tokens=WINDOW,
    )
    async with service_with_model(tmp_path, database_url, fake_llm, small) as service:
        yield service


def _tokens(body: dict[str, Any]) -> int:
    """A request's prompt tokens, counted as the service counts them."""
    return int(
        litellm.token_counter(
            model=f"openai/{SMALL}", messages=body["messages"], tools=body.get("tools")
        )
    )


def _turn_text(turn: int) -> str:
    return f"Turn {turn}: " + " ".join(f"fact-{turn}-{n} is {n * turn}." for n in range(1, 15))


async def test_a_long_conversation_is_compacted_and_no_request_passes_the_window(
    small_service: Service, tenant: str
) -> None:
    fake = small_service.fake_llm
    fake.always(SMALL, Reply.text("Noted.", prompt_tokens=300, completion_tokens=5))
    budget = Decimal("0.05")
    async with small_service.client(tenant) as client:
        created = await client.post("/api/v1/conversations", json={})
        conversation = created.json()["id"]
        tasks = []
        for turn in range(1, TURNS + 1):
            accepted = await submit(
                client,
                input=_turn_text(turn),
                conversation_id=conversation,
                model=SMALL,
                tools=[],
                budget={"max_cost_usd": str(budget)},
            )
            events = await stream(client, accepted["task_id"])
            assert events[-1].json["final_state"] == "completed", events[-2].json
            tasks.append((await client.get(f"/api/v1/tasks/{accepted['task_id']}")).json())
        chains = [(await client.get(f"/api/v1/tasks/{task['id']}/chain")).json() for task in tasks]

    requests = [r.body for r in fake.requests]
    assert all(_tokens(body) <= WINDOW for body in requests), [_tokens(b) for b in requests]
    summaries = [b for b in requests if b["messages"][0]["content"] == SUMMARY_PROMPT]
    assert summaries, "no compaction happened"
    # After a compaction the model sees the summary in place of the oldest turns.
    answered_after = [
        b
        for b in requests
        if any(str(m.get("content", "")).startswith(SUMMARY_HEADER) for m in b["messages"])
    ]
    assert answered_after
    assert requests[-1]["messages"][-1] == {"role": "user", "content": _turn_text(TURNS)}
    # Each compaction is an llm step of its turn, with purpose `compaction`, and billed there.
    compacting = [
        (task, chain)
        for task, chain in zip(tasks, chains, strict=True)
        if any(
            step["type"] == "tool_call"
            and step["tool_call"]["arguments"].get("purpose") == "compaction"
            for step in chain["steps"]
        )
    ]
    assert len(compacting) >= 1
    task, chain = compacting[0]
    calls = [s for s in chain["steps"] if s["type"] == "tool_call"]
    assert [c["tool_call"]["arguments"].get("purpose") for c in calls][-1] is None  # the answer
    assert task["usage"]["llm_calls"] == len(calls) >= 2
    spent = len(calls) * cost_of(300, 5)
    assert Decimal(task["usage"]["total_cost_usd"]) == spent
    assert Decimal(task["usage"]["remaining_budget"]["cost_usd"]) == budget - spent
    # The stored chain keeps the conversation whole: the next turn still sees every input
    # in its history rebuilt from the chains (compacted again for the model, not in storage).
    assert [t["turn"] for t in tasks] == list(range(1, TURNS + 1))


async def test_a_prompt_that_cannot_fit_fails_context_window_before_any_call(
    small_service: Service, tenant: str
) -> None:
    huge = " ".join(f"word{n}" for n in range(2000))
    async with small_service.client(tenant) as client:
        accepted = await submit(client, input=huge, model=SMALL, tools=[])
        events = await stream(client, accepted["task_id"])
    assert events[-2].event == "chain_failed"
    assert events[-2].json["error_code"] == "context_window"
    assert events[-2].json["details"]["window"] == WINDOW
    assert small_service.fake_llm.requests == []
