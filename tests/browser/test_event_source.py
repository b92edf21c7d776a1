"""A page on another origin follows a task's stream with a plain `EventSource` and a stream
ticket — to `done`, across a dropped connection, and into a new EventSource — in Chromium."""

import asyncio
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

from tests.api.helpers import script_two_tool_task, stream, submit
from tests.browser.conftest import OfflinePage, PageServer
from tests.browser.proxy import CuttingProxy
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service

EVENTS = "chain_started,task_status,reasoning_step,chain_completed,chain_failed,done"
# Every wait below ends on a condition in the page; this only bounds a broken run.
WAIT_MS = 20_000


async def _ticket(client: httpx.AsyncClient, task_id: str) -> str:
    response = await client.post(f"/api/v1/tasks/{task_id}/stream-ticket")
    assert response.status_code == 200, response.text
    url: str = response.json()["stream_url"]
    return url


async def _follow(
    offline: OfflinePage, pages: PageServer, stream_url: str, *, reopen_after: int = 0
) -> None:
    query = urlencode({"stream": stream_url, "events": EVENTS, "reopen_after": reopen_after})
    await offline.page.goto(f"{pages.url('stream.html')}?{query}")


async def _until(offline: OfflinePage, condition: str) -> None:
    await offline.page.wait_for_function(
        f"() => {{ const f = window.follower; return {condition}; }}", timeout=WAIT_MS
    )


async def _follower(offline: OfflinePage) -> dict[str, Any]:
    state: dict[str, Any] = await offline.page.evaluate("() => window.follower")
    return state


def _ids(state: dict[str, Any]) -> list[int]:
    return [int(event["id"]) for event in state["received"]]


async def test_a_page_follows_a_stream_to_done_and_resumes_it_after_the_network_drops(
    service: Service, tenant: str, page_server: PageServer, offline_page: OfflinePage
) -> None:
    answer = asyncio.Event()
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "17 * 23 + 4"}, id="c1")]),
        Reply.text("17 * 23 + 4 = 395.", gate=answer),
    )
    service_url = urlsplit(service.base_url)
    proxy = CuttingProxy(service_url.hostname or "", service_url.port or 0)
    async with proxy.running(), service.client(tenant) as client:
        accepted = await submit(client)
        await _follow(
            offline_page, page_server, proxy.base_url + await _ticket(client, accepted["task_id"])
        )
        # The run waits for its answer: the page has what was streamed so far, live.
        await service.fake_llm.wait_for_requests(2, MODEL)
        await _until(offline_page, "f.received.length >= 4")

        proxy.cut()
        await _until(offline_page, "f.errors >= 1")
        before_the_cut = _ids(await _follower(offline_page))
        # The EventSource reconnects by itself, saying what it has.
        await _until(offline_page, "f.opens >= 2")
        answer.set()
        await _until(offline_page, "f.done")
        followed = await _follower(offline_page)
        everything = await stream(client, accepted["task_id"])

    assert [(e["id"], e["type"]) for e in followed["received"]] == [
        (str(e.id), e.event) for e in everything
    ]
    assert _ids(followed) == list(range(1, len(everything) + 1))  # no gap, no repeat
    assert followed["received"][-1]["type"] == "done"
    assert followed["opens"] == 2
    first, reconnection = (head.decode("latin-1").lower() for head in proxy.requests[:2])
    assert f"origin: {page_server.origin}" in first
    assert "authorization:" not in first
    assert f"last-event-id: {before_the_cut[-1]}\r\n" in reconnection
    assert before_the_cut[-1] < _ids(followed)[-1]


async def test_a_page_resumes_a_stream_in_a_new_event_source_after_its_last_event(
    service: Service, tenant: str, page_server: PageServer, offline_page: OfflinePage
) -> None:
    script_two_tool_task(service.fake_llm)
    async with service.client(tenant) as client:
        accepted = await submit(client)
        everything = await stream(client, accepted["task_id"])
        url = service.base_url + await _ticket(client, accepted["task_id"])

    await _follow(offline_page, page_server, url, reopen_after=3)
    await _until(offline_page, "f.done")
    followed = await _follower(offline_page)

    assert followed["reopened"]
    assert followed["opens"] == 2
    assert _ids(followed) == [event.id for event in everything]


async def test_a_page_with_another_tasks_ticket_is_refused_for_good(
    service: Service, tenant: str, page_server: PageServer, offline_page: OfflinePage
) -> None:
    script_two_tool_task(service.fake_llm)
    script_two_tool_task(service.fake_llm)
    async with service.client(tenant) as client:
        first, second = await submit(client), await submit(client)
        await stream(client, first["task_id"])
        await stream(client, second["task_id"])
        url = service.base_url + await _ticket(client, first["task_id"])

    await _follow(offline_page, page_server, url.replace(first["task_id"], second["task_id"]))
    await _until(offline_page, "f.refused")
    followed = await _follower(offline_page)

    assert followed["received"] == []
    assert followed["opens"] == 0
