"""The service is ready before its LLM gateway has loaded LiteLLM (in a background thread): a
task submitted meanwhile is accepted at once, and its run waits for the load and then
completes; a load that fails makes the service unready and fails the tasks that waited,
rather than leaving them claimed."""

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.agents import AgentRuntime
from app.api.serving import DrainingServer
from app.llm import backend
from tests.api.helpers import assert_problem, stream, submit
from tests.conftest import fresh_database
from tests.fakes.openai_server import FakeLLMServer
from tests.service import running_service, service_settings

HOLD_LIMIT_S = 60.0


@contextmanager
def held_load(
    monkeypatch: pytest.MonkeyPatch, then: Callable[[], None]
) -> Iterator[tuple[threading.Event, threading.Event]]:
    """The gateways' load stops where LiteLLM is imported and the Router built, before its
    warm-up: `entered` is set once it is there, `then` runs when `release` is set."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        entered.set()
        if not release.wait(HOLD_LIMIT_S):
            raise TimeoutError("the test never released the load")
        then()

    monkeypatch.setattr(backend, "warm_up", hold)
    try:
        yield entered, release
    finally:
        release.set()  # a failed test leaves no thread waiting


@contextmanager
def noted_waits(monkeypatch: pytest.MonkeyPatch) -> Iterator[asyncio.Event]:
    """Set when anything starts waiting for a runtime's load from now on (a run's launch)."""
    waiting = asyncio.Event()
    load = AgentRuntime.loaded

    async def noted(runtime: AgentRuntime) -> None:
        waiting.set()
        await load(runtime)

    monkeypatch.setattr(AgentRuntime, "loaded", noted)
    yield waiting


async def submitted_while_held(
    client: httpx.AsyncClient, waiting: asyncio.Event, release: threading.Event
) -> dict[str, Any]:
    """Submits a task while the load is held: it is accepted at once (the answer does not
    wait for seconds of loading), and its run waits for the load; then releases the load."""
    async with asyncio.timeout(HOLD_LIMIT_S):
        accepted = await submit(client)
        await waiting.wait()
    assert accepted["status"] == "submitted"
    release.set()
    return accepted


async def test_a_task_submitted_while_the_gateway_loads_waits_for_it_then_completes(
    tmp_path: Path, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with held_load(monkeypatch, then=backend.warm_up) as (entered, release):
        async with fresh_database("sqlite", tmp_path) as url:
            settings = service_settings(
                tmp_path, url, fake_llm, models_file=None, default_model="demo"
            )
            async with running_service(settings, fake_llm) as service:
                # Started, and its gateway's load under way in its thread, held there.
                assert await asyncio.to_thread(entered.wait, HOLD_LIMIT_S)
                tenant = await service.create_tenant("loading")
                with noted_waits(monkeypatch) as waiting:
                    async with service.client(tenant) as client:
                        ready = await client.get("/readyz")
                        health = await client.get("/healthz")
                        accepted = await submitted_while_held(client, waiting, release)
                        events = await stream(client, accepted["task_id"])

    assert (ready.status_code, health.status_code) == (200, 200)  # while the load was held
    assert [event.event for event in events][-1] == "done"
    assert events[-1].json["final_state"] == "completed"
    completed = [event.json for event in events if event.event == "chain_completed"]
    assert "395" in completed[0]["answer"]


async def test_a_gateway_that_cannot_load_makes_the_service_unready_and_fails_its_tasks(
    tmp_path: Path, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise RuntimeError("no LiteLLM here")

    with held_load(monkeypatch, then=broken) as (entered, release):
        async with fresh_database("sqlite", tmp_path) as url:
            settings = service_settings(
                tmp_path, url, fake_llm, models_file=None, default_model="demo"
            )
            async with running_service(settings, fake_llm) as service:
                assert await asyncio.to_thread(entered.wait, HOLD_LIMIT_S)
                tenant = await service.create_tenant("broken")
                with noted_waits(monkeypatch) as waiting:
                    async with service.client(tenant) as client:
                        accepted = await submitted_while_held(client, waiting, release)
                        events = await stream(client, accepted["task_id"])
                        unready = await client.get("/readyz")

    assert events[-1].json["final_state"] == "failed"
    failed = [event.json for event in events if event.event == "chain_failed"]
    assert failed[0]["error_code"] == "internal_error"
    assert "the LLM gateway did not load (RuntimeError)" in failed[0]["error_message"]
    body = assert_problem(unready, 503, "service-unavailable")
    assert "the LLM gateway could not be loaded (RuntimeError)" in body["detail"]


async def test_the_gateway_starts_loading_once_the_server_listens(
    tmp_path: Path, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LiteLLM's load takes seconds of CPU: begun during the start-up, it would compete with
    # it (on one CPU, the time to ready grows by what it took meanwhile).
    listening: list[bool] = []
    load = AgentRuntime.loaded

    async def noted(runtime: AgentRuntime) -> None:
        if not listening:
            server = running_servers[-1]
            listening.append(server.ready.is_set() and bool(server.servers))
        await load(runtime)

    running_servers: list[DrainingServer] = []
    start = DrainingServer.startup

    async def starting(server: DrainingServer, sockets: Any = None) -> None:
        running_servers.append(server)
        await start(server, sockets)

    monkeypatch.setattr(AgentRuntime, "loaded", noted)
    monkeypatch.setattr(DrainingServer, "startup", starting)
    async with fresh_database("sqlite", tmp_path) as url:
        settings = service_settings(tmp_path, url, fake_llm, models_file=None, default_model="demo")
        async with running_service(settings, fake_llm) as service:
            await service.state.runtime.loaded()
    assert listening == [True]
