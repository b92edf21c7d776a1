"""The web tools in a tenant's runs, through the whole service: the tenant's network allow-list
(`PUT /api/v1/tenants/{id}/network`, a platform admin's allowance) lets its runs reach a
loopback server, whose page arrives as Markdown with progress in the stream; without it the step
fails as `destination_refused`, nothing is connected and the run goes on; the service's own port
stays refused under a loopback network, and is reached once the allowance names it exactly; a
tenant secret sent by `http_request` reaches the server but no stream, chain, export or model
prompt."""

import json
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from app.resources.secrets import SecretVault
from tests.api.helpers import configure, open_network, stream, submit
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service
from tests.tools.net.servers import Listener, serve

ADMIN = {"sub": "root", "roles": ("tenant_admin",)}
TOKEN = "tok-8c1e02d9f4b7a3"
PAGE = "<html><head><title>News</title></head><body><h1>Today</h1><p>All quiet.</p></body></html>"


def _site(seen: list[dict[str, str]]) -> web.Application:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def echo(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.json_response({"authorization": request.headers.get("Authorization")})

    app = web.Application()
    app.router.add_get("/news", page)
    app.router.add_post("/echo", echo)
    return app


async def _run(service: Service, tenant: str, *replies: Reply) -> tuple[dict[str, Any], list[Any]]:
    service.fake_llm.script(MODEL, *replies)
    async with service.client(tenant) as client:
        accepted = await submit(client, input="Use the web.")
        events = await stream(client, accepted["task_id"])
    return accepted, events


def _tool_steps(events: list[Any], tool: str) -> tuple[dict[str, Any], dict[str, Any]]:
    steps = [e.json["step"] for e in events if e.event == "reasoning_step"]
    [call] = [s for s in steps if s["type"] == "tool_call" and s["tool_call"]["tool_name"] == tool]
    correlation = call["tool_call"]["correlation_id"]
    [result] = [
        s
        for s in steps
        if s["type"] == "tool_result" and s["tool_result"]["correlation_id"] == correlation
    ]
    return call, result


async def test_a_tenants_allow_list_lets_web_fetch_reach_its_loopback_server(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "tools", {"enabled_tools": ["web_fetch"]})
    await open_network(service, tenant, ["127.0.0.1/32"])
    async with serve(_site([])) as port:
        url = f"http://127.0.0.1:{port}/news"
        _, events = await _run(
            service,
            tenant,
            Reply.tool_calls([ToolCall("web_fetch", {"url": url}, id="w1")]),
            Reply.text("All quiet today."),
        )

    call, result = _tool_steps(events, "web_fetch")
    info = result["tool_result"]
    assert info["success"], info
    assert info["result"]["title"] == "News"
    assert info["result"]["content"] == "# Today\n\nAll quiet."
    progress = [e for e in events if e.event == "tool_progress"]
    assert progress
    assert {p.json["step_id"] for p in progress} == {call["id"]}
    last = progress[-1].json
    assert (last["message"], last["fraction"]) == (f"{len(PAGE)} bytes", 1.0)
    order = [e.json.get("step", {}).get("id") or e.event for e in events]
    assert order.index(call["id"]) < events.index(progress[0])
    assert events.index(progress[-1]) < order.index(result["id"])
    assert events[-1].json["final_state"] == "completed"


async def test_without_the_allow_list_the_step_is_refused_and_the_run_goes_on(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "tools", {"enabled_tools": ["web_fetch"]})
    with Listener() as listener:
        url = f"http://localhost:{listener.port}/admin"
        _, events = await _run(
            service,
            tenant,
            Reply.tool_calls([ToolCall("web_fetch", {"url": url}, id="w1")]),
            Reply.text("I could not read it."),
        )

        assert listener.connections() == 0
    _, result = _tool_steps(events, "web_fetch")
    info = result["tool_result"]
    assert not info["success"]
    assert info["error_code"] == "destination_refused"
    assert f"refused {url}: localhost is 127.0.0.1, a loopback address" in info["error"]
    assert "network allow-list" in info["error"]
    assert events[-1].json["final_state"] == "completed"


async def test_a_secret_header_reaches_the_server_and_nothing_the_service_shows(
    service: Service, tenant: str
) -> None:
    state = service.state
    if state.toolbox.secrets is None:  # until the lifespan builds one
        state.toolbox.secrets = SecretVault.from_settings(state.database, state.settings)
    await configure(service, tenant, "tools", {"enabled_tools": ["http_request"]})
    await open_network(service, tenant, ["127.0.0.1/32"])
    async with service.client(tenant, **ADMIN) as admin:
        response = await admin.put(
            f"/api/v1/tenants/{tenant}/secrets/API_TOKEN", json={"value": TOKEN}
        )
        assert response.status_code == 201, response.text
    seen: list[dict[str, str]] = []
    async with serve(_site(seen)) as port:
        arguments = {
            "method": "POST",
            "url": f"http://127.0.0.1:{port}/echo",
            "headers": {"Authorization": {"secret": "API_TOKEN", "prefix": "Bearer "}},
            "json": {"ping": True},
        }
        accepted, events = await _run(
            service,
            tenant,
            Reply.tool_calls([ToolCall("http_request", arguments, id="h1")]),
            Reply.text("The API answered."),
        )

    [headers] = seen
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    _, result = _tool_steps(events, "http_request")
    assert result["tool_result"]["result"]["body"] == {"authorization": "Bearer [secret]"}
    async with service.client(tenant, **ADMIN) as admin:
        shown = [
            json.dumps([(e.event, e.data) for e in events]),
            (await admin.get(f"/api/v1/tasks/{accepted['task_id']}/chain")).text,
            (await admin.get(f"/api/v1/chains/{accepted['chain_id']}/export")).text,
            (await admin.get(f"/api/v1/tenants/{tenant}/audit")).text,
        ]
    shown.append(json.dumps([request.body for request in service.fake_llm.requests]))
    for text in shown:
        assert TOKEN not in text


async def test_the_services_own_port_is_reached_only_where_a_platform_admin_names_it(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "tools", {"enabled_tools": ["web_fetch"]})
    await open_network(service, tenant, ["127.0.0.0/8", "::1"])
    port = urlsplit(service.base_url).port
    own = f"http://127.0.0.1:{port}/healthz"
    fetch = Reply.tool_calls([ToolCall("web_fetch", {"url": own}, id="w1")])

    _, events = await _run(service, tenant, fetch, Reply.text("It is not reachable."))

    _, result = _tool_steps(events, "web_fetch")
    info = result["tool_result"]
    assert info["error_code"] == "destination_refused"
    assert f"port {port} of 127.0.0.1 is this service's own listener" in info["error"]
    assert f"naming exactly 127.0.0.1:{port}" in info["error"]

    await open_network(service, tenant, ["127.0.0.0/8", f"127.0.0.1:{port}"])
    _, events = await _run(service, tenant, fetch, Reply.text("It is alive."))

    _, result = _tool_steps(events, "web_fetch")
    info = result["tool_result"]
    assert info["success"], info
    assert json.loads(info["result"]["content"]) == {"status": "ok"}
