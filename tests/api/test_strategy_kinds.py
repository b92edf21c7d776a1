"""Every strategy through the running service, on each database: a task names its kind, the
fake model receives the strategy's shape of requests, the stream and the stored chain hold
the same records (the tree, the plan, the choice), and the answer is the strategy's. `auto`
runs `direct`, `cot` or `plan` for tasks its assessment scores low, medium or high."""

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.api.helpers import define_agent, stream, submit
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL, Service

PLAN = {"steps": [{"id": "only", "description": "do only", "strategy": "direct"}]}
# `auto`'s table, with a plan for what it scores high.
TABLE = [
    {"below": 0.3, "strategy": "direct"},
    {"below": 0.6, "strategy": "cot"},
    {"below": 1.0, "strategy": "plan"},
]
OPTIONS = {
    "tot": {"breadth": 2, "depth": 1, "beam": 1},
    "mcts": {"simulations": 2, "breadth": 2, "max_depth": 1},
    "auto": {"table": TABLE},
}


def _direct(fake: FakeLLMServer) -> None:
    fake.script_matching(MODEL, ("directly",), Reply.text("done"))


def _cot(fake: FakeLLMServer) -> None:
    fake.script_matching(MODEL, ("step by step",), Reply.text("So it is.\nAnswer: done"))


def _tot(fake: FakeLLMServer) -> None:
    fake.script_matching(MODEL, ("propose 2 different",), Reply.text('{"thoughts": ["l", "r"]}'))
    fake.script_matching(MODEL, ("rate how likely", "1. l"), Reply.text('{"score": 0.2}'))
    fake.script_matching(MODEL, ("rate how likely", "1. r"), Reply.text('{"score": 0.8}'))
    fake.script_matching(MODEL, ("final answer to the task",), Reply.text("done"))


def _mcts(fake: FakeLLMServer) -> None:
    # Two expansions of the root (a tool call, rolled out, then an answer), each scored.
    fake.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "2+2"})]),
        Reply.text("done"),
        Reply.text('{"score": 0.9, "reason": "checked"}'),
        Reply.text("Answer: five"),
        Reply.text('{"score": 0.1, "reason": "wrong"}'),
    )


def _plan(fake: FakeLLMServer) -> None:
    fake.script_matching(MODEL, ("Plan how to do the task",), Reply.text(json.dumps(PLAN)))
    fake.script_matching(MODEL, ("This step: do only",), Reply.text("part"))
    fake.script_matching(MODEL, ("from the results of the plan's steps",), Reply.text("done"))


# kind: (its script, its requests, the events its records must include)
KINDS: dict[str, tuple[Callable[[FakeLLMServer], None], int, list[str]]] = {
    "direct": (_direct, 1, []),
    "cot": (_cot, 1, []),
    "tot": (_tot, 4, ["thought", "thought", "thought_scored", "thought_scored", "path_chosen"]),
    "mcts": (_mcts, 5, ["thought", "thought_scored", "thought", "thought_scored", "path_chosen"]),
    "plan": (
        _plan,
        3,
        ["plan_created", "plan_step_started", "plan_step_completed", "plan_completed"],
    ),
}


def _events(steps: list[dict[str, Any]]) -> list[str]:
    return [
        step["thinking"]["event"]
        for step in steps
        if step["type"] == "thinking" and step["thinking"].get("event")
    ]


async def _finished(
    client: httpx.AsyncClient, **body: Any
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The task as stored, the steps its stream showed, the steps its stored chain holds."""
    accepted = await submit(client, **body)
    events = await stream(client, accepted["task_id"])
    task: dict[str, Any] = (await client.get(f"/api/v1/tasks/{accepted['task_id']}")).json()
    chain = (await client.get(f"/api/v1/tasks/{accepted['task_id']}/chain")).json()
    streamed = [event.json["step"] for event in events if event.event == "reasoning_step"]
    return task, streamed, chain["steps"]


@pytest.mark.parametrize("kind", list(KINDS))
async def test_each_kind_runs_its_shape_of_calls_and_stores_what_it_streamed(
    service: Service, tenant: str, kind: str
) -> None:
    script, requests, records = KINDS[kind]
    script(service.fake_llm)
    await define_agent(service, tenant, "thinker", kind=kind, strategy=OPTIONS)
    async with service.client(tenant) as client:
        task, streamed, stored = await _finished(client, input="Think it over.", agent="thinker")

    assert (task["status"], task["answer"]) == ("completed", "done")
    assert len(service.fake_llm.requests_for(MODEL)) == requests
    assert _events(streamed) == records
    assert [(s["id"], s["type"]) for s in stored] == [(s["id"], s["type"]) for s in streamed]
    assert _events(stored) == records
    if kind in ("tot", "mcts"):  # the chosen path runs through the best-scored node
        [chosen] = [
            s
            for s in stored
            if s["type"] == "thinking" and s["thinking"].get("event") == "path_chosen"
        ]
        assert chosen["thinking"]["confidence"] == (0.8 if kind == "tot" else 0.9)
    service.fake_llm.verify()


@pytest.mark.parametrize(
    ("complexity", "strategy", "requests"), [(0.1, "direct", 1), (0.45, "cot", 1), (0.8, "plan", 3)]
)
async def test_auto_runs_what_its_table_maps_each_score_to(
    service: Service, tenant: str, complexity: float, strategy: str, requests: int
) -> None:
    fake = service.fake_llm
    assessed = {"complexity": complexity, "reason": "as scripted"}
    fake.script_matching(MODEL, ("Rate how complex",), Reply.text(json.dumps(assessed)))
    KINDS[strategy][0](fake)
    await define_agent(service, tenant, "chooser", kind="auto", strategy=OPTIONS)
    async with service.client(tenant) as client:
        task, streamed, stored = await _finished(client, input="Some task.", agent="chooser")

    assert (task["status"], task["answer"]) == ("completed", "done")
    assert len(fake.requests_for(MODEL)) == 1 + requests
    events = _events(stored)
    assert events[:2] == ["complexity_assessed", "strategy_selected"]
    assert events[2:] == KINDS[strategy][2]
    [selected] = [
        s
        for s in stored
        if s["type"] == "thinking" and s["thinking"].get("event") == "strategy_selected"
    ]
    assert selected["thinking"]["detail"]["strategy"] == strategy
    assert [s["id"] for s in stored] == [s["id"] for s in streamed]
    fake.verify()
