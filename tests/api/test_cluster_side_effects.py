"""A call with side effects in flight when its instance is killed is not made again: the
instance that resumes the run records its outcome as unknown (`outcome_unknown`) and tells the
model so, and the tool's server sees the request once. Such a call starts only once its
`tool_call` step is stored, so a resume always knows it was made."""

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web
from sqlalchemy import func, select

from app.storage import Database
from app.storage.tables import reasoning_steps
from tests.api.helpers import stream, submit
from tests.api.test_cluster import FAST_LEASE, assert_whole
from tests.cluster import cluster
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL
from tests.tools.net.servers import serve

pytestmark = pytest.mark.parametrize("own_database_url", ["postgres"], indirect=True)

ORDER = {"order": "ord-7731", "quantity": 3}


@dataclass
class OrderDesk:
    """An HTTP API that places orders: it records every request it receives; the first it
    never answers (until `answer_all` is set), so the call that sent it is in flight."""

    # Read as each request arrives: how many of the calls that sent one are stored.
    stored_calls: Callable[[], Awaitable[int]]
    received: list[tuple[str, str, object]] = field(default_factory=list)
    stored_at_arrival: list[int] = field(default_factory=list)
    first_arrived: asyncio.Event = field(default_factory=asyncio.Event)
    answer_all: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        async def place(request: web.Request) -> web.Response:
            self.received.append((request.method, request.path, await request.json()))
            self.stored_at_arrival.append(await self.stored_calls())
            if len(self.received) == 1:
                self.first_arrived.set()
                await self.answer_all.wait()
            return web.json_response({"placed": True}, status=201)

        app = web.Application()
        app.router.add_route("*", "/orders", place)
        return app


@asynccontextmanager
async def order_desk(database_url: str) -> AsyncIterator[tuple[OrderDesk, str]]:
    """The desk served on 127.0.0.1, and its orders URL; it counts the stored `http_request`
    call steps in `database_url` as each request arrives."""
    database = Database(database_url)

    async def stored_calls() -> int:
        statement = (
            select(func.count())
            .select_from(reasoning_steps)
            .where(reasoning_steps.c.type == "tool_call")
            .where(reasoning_steps.c.tool_name == "http_request")
        )
        async with database.read() as connection:
            return int((await connection.execute(statement)).scalar_one())

    desk = OrderDesk(stored_calls)
    try:
        async with serve(desk.app()) as port:
            try:
                yield desk, f"http://127.0.0.1:{port}/orders"
            finally:
                desk.answer_all.set()
    finally:
        await database.dispose()


async def test_a_side_effecting_call_in_flight_at_the_kill_is_not_repeated_and_told_unknown(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """a is killed while its run's `http_request` POST waits for the server's answer (sent
    only once the call's step was stored); b resumes the run, does not send the POST again
    (the server received one request), records the call's result as failed with
    `outcome_unknown`, and the model's next request carries that as the call's tool message;
    the run completes, its stream ids 1..N with one `resumed`."""
    async with (
        order_desk(own_database_url) as (desk, url),
        cluster(own_database_url, tmp_path, fake_llm, **FAST_LEASE) as group,
    ):
        arguments = {"method": "POST", "url": url, "json": ORDER}
        fake_llm.script(
            MODEL,
            Reply.tool_calls([ToolCall("http_request", arguments, id="h1")]),
            Reply.text("I could not confirm the order; please check it before placing it again."),
        )
        a = await group.instance("a")
        platform = group.token_for("ops", ("platform_admin",))
        async with a.client(platform) as on_a:
            allowed = await on_a.put(
                f"/api/v1/tenants/{group.tenant}/network",
                json={"platform_allow": ["127.0.0.1/32"]},
            )
            assert allowed.status_code == 200, allowed.text
        b = await group.instance("b")
        async with a.client(group.token) as on_a:
            accepted = await submit(on_a, input="Place the order.", tools=["http_request"])
            task_id = accepted["task_id"]
            await asyncio.wait_for(desk.first_arrived.wait(), 20)
        await a.kill()
        async with b.client(group.token) as on_b:
            events = await asyncio.wait_for(stream(on_b, task_id), 30)
            chain = (await on_b.get(f"/api/v1/tasks/{task_id}/chain")).json()
            task = (await on_b.get(f"/api/v1/tasks/{task_id}")).json()

    # The tool's server: the POST arrived once, from a; b did not send it again. When it
    # arrived, the call's step was stored already.
    assert desk.received == [("POST", "/orders", ORDER)]
    assert desk.stored_at_arrival == [1]

    assert_whole(events, "completed")
    assert task["status"] == "completed"
    resumed = [e for e in events if e.event == "task_status" and e.json.get("resumed")]
    assert len(resumed) == 1

    # The stored chain: one http_request call, its result failed as `outcome_unknown`.
    steps = chain["steps"]
    [call] = [
        s
        for s in steps
        if s["type"] == "tool_call" and s["tool_call"]["tool_name"] == "http_request"
    ]
    assert call["tool_call"]["arguments"] == arguments
    correlation = call["tool_call"]["correlation_id"]
    [result] = [
        s
        for s in steps
        if s["type"] == "tool_result" and s["tool_result"]["correlation_id"] == correlation
    ]
    info = result["tool_result"]
    assert info["success"] is False
    assert info["error_code"] == "outcome_unknown"
    assert "outcome of this call of 'http_request' is unknown" in info["error"]
    # The stream: the call was made before the kill, its result came after the resume.
    by_id = {e.json["step"]["id"]: e for e in events if e.event == "reasoning_step"}
    assert events.index(by_id[call["id"]]) < events.index(resumed[0])
    assert events.index(resumed[0]) < events.index(by_id[result["id"]])
    assert by_id[result["id"]].json["step"]["tool_result"]["error_code"] == "outcome_unknown"

    # The model: asked once on a (the call), once on b with the unknown outcome; the first
    # call was replayed from its stored step, not made again.
    requests = fake_llm.requests_for(MODEL)
    assert len(requests) == 2
    [tool_message] = [m for m in requests[1].body["messages"] if m["role"] == "tool"]
    assert tool_message["tool_call_id"] == "h1"
    assert tool_message["content"].startswith("Error (outcome_unknown): ")
    assert "is unknown" in tool_message["content"]
    [assistant] = [m for m in requests[1].body["messages"] if m.get("tool_calls")]
    [sent] = assistant["tool_calls"]
    assert sent["function"]["name"] == "http_request"
    assert json.loads(sent["function"]["arguments"]) == arguments
    assert events[-2].json["answer"].startswith("I could not confirm the order")
