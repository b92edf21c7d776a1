"""web_fetch and http_request through the executor, against real servers on 127.0.0.1 that the
run's network policy allows: pages become Markdown, PDFs text, a body past the cap is cut and
says so, progress arrives in order, and a secret header reaches the server but never a step."""

import json
from collections.abc import Iterable, Mapping
from typing import Any
from uuid import uuid4

import pytest
from aiohttp import web

from app.chain import ErrorCode, ReasoningChain
from app.config import Settings
from app.tools.builtin import builtin_tools
from app.tools.builtin.web import HttpRequestTool, WebFetchTool
from app.tools.executor import ToolExecutor
from app.tools.models import ToolCallContext, ToolProgress
from app.tools.net import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT_S, DEFAULT_USER_AGENT
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult
from tests.tools.net.servers import Listener, ScriptedResolver, context, minimal_pdf, serve

ALLOW_LOOPBACK = ["127.0.0.1/32"]
TOKEN = "tok-3f9a8c7e51d2"

HTML = """<html><head><title>Docs</title><script>tracking()</script></head><body>
<nav><a href="/">Home</a></nav><h1>Install</h1><p>Run <code>pip install x</code>, then read
<a href="https://example.com/guide">the guide</a>.</p><h2>Usage</h2><p>Call it.</p></body></html>"""


def _site(*, page_bytes: int = 0, seen: list[web.Request] | None = None) -> web.Application:
    """/page (HTML), /big (`page_bytes` of HTML, with a Content-Length), /chunked (the same
    without), /report.pdf, /echo (the request, as JSON) and /data.json."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=HTML, content_type="text/html")

    async def big(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
        if request.path == "/big":
            response.content_length = page_bytes
        await response.prepare(request)
        line = b"<p>" + b"word " * 19 + b"</p>\n"  # 100 bytes
        sent = 0
        while sent < page_bytes:
            chunk = (line * 160)[: page_bytes - sent]
            await response.write(chunk)
            sent += len(chunk)
        await response.write_eof()
        return response

    async def pdf(request: web.Request) -> web.Response:
        body = minimal_pdf(["Quarterly results", "Revenue grew"], title="Q3")
        return web.Response(body=body, content_type="application/pdf")

    async def echo(request: web.Request) -> web.Response:
        if seen is not None:
            seen.append(request)
        body = await request.text()
        answer = {
            "method": request.method,
            "headers": dict(request.headers),
            "body": body,
        }
        return web.json_response(answer, headers={"X-Seen-Auth": request.headers.get("X", "")})

    async def data(request: web.Request) -> web.Response:
        return web.json_response({"items": [1, 2, 3], "next": None})

    app = web.Application()
    app.router.add_get("/page", page)
    app.router.add_get("/big", big)
    app.router.add_get("/chunked", big)
    app.router.add_get("/report.pdf", pdf)
    app.router.add_route("*", "/echo", echo)
    app.router.add_get("/data.json", data)
    return app


async def _run(
    tool: str,
    arguments: dict[str, Any],
    *,
    allow: Iterable[str] = ALLOW_LOOPBACK,
    secrets: Mapping[str, str] | None = None,
    web_fetch: WebFetchTool | None = None,
    http_request: HttpRequestTool | None = None,
    call_context: ToolCallContext | None = None,
    chain: ReasoningChain | None = None,
) -> ToolResult:
    chain = chain or ReasoningChain(task_id="t", agent_id="a")
    registry = ToolRegistry([web_fetch or WebFetchTool(), http_request or HttpRequestTool()])
    given = call_context or context(allow, secrets=secrets)
    return await ToolExecutor(registry).execute(chain, given, tool, arguments)


def test_the_tools_default_limits_are_the_settings_defaults() -> None:
    fields = Settings.model_fields

    assert fields["fetch_max_bytes"].default == DEFAULT_MAX_BYTES
    assert fields["fetch_timeout_s"].default == DEFAULT_TIMEOUT_S
    assert fields["fetch_user_agent"].default == DEFAULT_USER_AGENT


def test_both_tools_are_built_in() -> None:
    names = [tool.definition.name for tool in builtin_tools()]

    assert {"web_fetch", "http_request"} <= set(names)


def test_http_request_says_it_is_not_idempotent_and_is_never_retried() -> None:
    definition = HttpRequestTool().definition

    assert "Not idempotent" in definition.description
    assert definition.retry.max_attempts == 1
    assert WebFetchTool(timeout_s=7).definition.timeout_s > 7


async def test_html_becomes_markdown() -> None:
    async with serve(_site()) as port:
        result = await _run("web_fetch", {"url": f"http://127.0.0.1:{port}/page"})

    assert result.success, result.error
    assert result.value == {
        "url": f"http://127.0.0.1:{port}/page",
        "final_url": f"http://127.0.0.1:{port}/page",
        "status": 200,
        "content_type": "text/html",
        "title": "Docs",
        "content": "# Install\n\nRun `pip install x`, then read\n[the guide]"
        "(https://example.com/guide).\n\n## Usage\n\nCall it.",
        "truncated": False,
        "bytes": len(HTML.encode()),
        "next_offset": None,
    }
    assert result.result_step.visibility.summary == f"Fetched http://127.0.0.1:{port}/page (200)"


async def test_a_pdf_becomes_text() -> None:
    async with serve(_site()) as port:
        result = await _run("web_fetch", {"url": f"http://127.0.0.1:{port}/report.pdf"})

    assert result.success, result.error
    assert result.value["content_type"] == "application/pdf"
    assert result.value["title"] == "Q3"
    assert result.value["content"] == "Quarterly results\n\nRevenue grew"


@pytest.mark.parametrize("path", ["/big", "/chunked"])
async def test_a_response_larger_than_the_cap_is_cut_at_the_cap_and_says_so(path: str) -> None:
    cap = 64 * 1024
    async with serve(_site(page_bytes=512 * 1024)) as port:
        result = await _run(
            "web_fetch",
            {"url": f"http://127.0.0.1:{port}{path}", "max_chars": 500},
            web_fetch=WebFetchTool(max_bytes=cap),
        )

    assert result.success, result.error
    assert result.value["truncated"] is True
    assert result.value["bytes"] == cap
    assert result.value["content"].startswith("word word")
    assert result.value["next_offset"] == 500


async def test_long_text_comes_in_windows() -> None:
    async with serve(_site(page_bytes=20_000)) as port:
        url = f"http://127.0.0.1:{port}/big"
        first = await _run("web_fetch", {"url": url, "max_chars": 1000})
        second = await _run("web_fetch", {"url": url, "max_chars": 1000, "offset": 1000})
        whole = await _run("web_fetch", {"url": url, "max_chars": 50_000})

    assert first.value["next_offset"] == 1000
    assert first.value["content"] + second.value["content"] == whole.value["content"][:2000]
    assert whole.value["next_offset"] is None
    assert whole.value["truncated"] is False


@pytest.mark.parametrize(("path", "known"), [("/big", True), ("/chunked", False)])
async def test_progress_reports_arrive_in_order_between_the_calls_steps(
    path: str, known: bool
) -> None:
    chain = ReasoningChain(task_id="t", agent_id="a")
    reports: list[tuple[ToolProgress, int]] = []
    base = context(ALLOW_LOOPBACK)
    call_context = ToolCallContext(
        task_id="t",
        agent_id="a",
        chain_id=chain.id,
        services=base.services,
        on_progress=lambda report: reports.append((report, len(chain.steps))),
    )
    size = 1024 * 1024
    async with serve(_site(page_bytes=size)) as port:
        result = await _run(
            "web_fetch",
            {"url": f"http://127.0.0.1:{port}{path}"},
            call_context=call_context,
            chain=chain,
            web_fetch=WebFetchTool(max_bytes=2 * size),
        )

    assert result.success, result.error
    assert 2 <= len(reports) <= 11
    assert all(report.call_step is result.call_step for report, _ in reports)
    assert all(steps == 1 for _, steps in reports)  # after the call step, before the result
    read = [int(report.message.removesuffix(" bytes")) for report, _ in reports]
    assert read == sorted(read)
    assert len(set(read)) >= len(read) - 1  # the last report may repeat the count as done
    assert read[-1] == size
    fractions = [report.fraction for report, _ in reports]
    assert fractions[-1] == 1.0
    if known:
        assert fractions == sorted(f for f in fractions if f is not None)
    else:
        assert fractions[:-1] == [None] * (len(fractions) - 1)


async def test_the_user_agent_comes_from_the_tools_settings() -> None:
    seen: list[web.Request] = []
    async with serve(_site(seen=seen)) as port:
        await _run("web_fetch", {"url": f"http://127.0.0.1:{port}/echo"})
        await _run(
            "web_fetch",
            {"url": f"http://127.0.0.1:{port}/echo"},
            web_fetch=WebFetchTool(user_agent="Probe/2"),
        )

    assert [request.headers["User-Agent"] for request in seen] == [DEFAULT_USER_AGENT, "Probe/2"]


async def test_without_services_only_public_addresses_may_be_fetched() -> None:
    with Listener() as listener:
        bare = ToolCallContext(task_id="t", agent_id="a", chain_id=uuid4())
        result = await _run(
            "web_fetch", {"url": f"http://127.0.0.1:{listener.port}/"}, call_context=bare
        )

        assert result.error_code is ErrorCode.DESTINATION_REFUSED
        assert listener.connections() == 0


async def test_a_secret_header_reaches_the_server_but_never_a_recorded_step() -> None:
    chain = ReasoningChain(task_id="t", agent_id="a")
    seen: list[web.Request] = []
    async with serve(_site(seen=seen)) as port:
        result = await _run(
            "http_request",
            {
                "method": "POST",
                "url": f"http://127.0.0.1:{port}/echo",
                "headers": {
                    "Authorization": {"secret": "API_TOKEN", "prefix": "Bearer "},
                    "X": {"secret": "API_TOKEN"},
                },
                "json": {"q": "status"},
            },
            secrets={"API_TOKEN": TOKEN},
            chain=chain,
        )

    assert result.success, result.error
    [request] = seen
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["X"] == TOKEN
    recorded = "".join(step.model_dump_json() for step in chain.steps)
    assert TOKEN not in recorded
    assert '"secret":"API_TOKEN","prefix":"Bearer "' in recorded
    assert result.info.result["body"]["headers"]["Authorization"] == "Bearer [secret]"
    assert result.info.result["headers"]["x-seen-auth"] == "[secret]"
    assert result.info.result["body"]["body"] == '{"q": "status"}'


async def test_an_unknown_secret_fails_the_call_before_any_request() -> None:
    seen: list[web.Request] = []
    async with serve(_site(seen=seen)) as port:
        result = await _run(
            "http_request",
            {"url": f"http://127.0.0.1:{port}/echo", "headers": {"X-Key": {"secret": "NOPE"}}},
            secrets={},
        )

    assert result.error_code is ErrorCode.SECRET_NOT_FOUND
    assert seen == []


async def test_http_request_reaches_only_hosts_the_tenant_allowed() -> None:
    resolver = ScriptedResolver({"api.example": ["127.0.0.1"], "public.example": ["8.8.8.8"]})
    tool = HttpRequestTool(resolver=resolver)
    async with serve(_site()) as port:
        by_cidr = await _run(
            "http_request", {"url": f"http://127.0.0.1:{port}/data.json"}, http_request=tool
        )
        public = await _run(
            "http_request", {"url": "http://public.example/"}, allow=[], http_request=tool
        )
        name_only = await _run(
            "http_request",
            {"url": f"http://api.example:{port}/data.json"},
            allow=["api.example"],
            http_request=tool,
        )
        name_and_address = await _run(
            "http_request",
            {"url": f"http://api.example:{port}/data.json"},
            allow=["api.example", "127.0.0.1"],
            http_request=tool,
        )

    assert by_cidr.success, by_cidr.error
    assert by_cidr.value["body"] == {"items": [1, 2, 3], "next": None}
    assert public.error_code is ErrorCode.DESTINATION_REFUSED
    assert public.error is not None
    assert "http_request reaches only hosts the tenant allowed" in public.error
    assert "public.example is not on its network allow-list" in public.error
    assert name_only.error_code is ErrorCode.DESTINATION_REFUSED
    assert name_only.error is not None
    assert "api.example is 127.0.0.1, a loopback address" in name_only.error
    assert name_and_address.success, name_and_address.error


@pytest.mark.parametrize(
    ("arguments", "sent_body", "content_type"),
    [
        ({"method": "PUT", "body": "plain words"}, "plain words", "text/plain; charset=utf-8"),
        ({"method": "PATCH", "json": [1, "é"]}, '[1, "é"]', "application/json"),
        (
            {"method": "POST", "body": "<a/>", "headers": {"Content-Type": "application/xml"}},
            "<a/>",
            "application/xml",
        ),
        ({"method": "DELETE"}, "", None),
    ],
)
async def test_methods_and_bodies_are_sent_as_given(
    arguments: dict[str, Any], sent_body: str, content_type: str | None
) -> None:
    async with serve(_site()) as port:
        result = await _run("http_request", {"url": f"http://127.0.0.1:{port}/echo", **arguments})

    assert result.success, result.error
    echoed = result.value["body"]
    assert echoed["method"] == arguments["method"]
    assert echoed["body"] == sent_body
    assert echoed["headers"].get("Content-Type") == content_type


async def test_head_returns_no_body_and_a_long_body_is_cut_to_max_chars() -> None:
    async with serve(_site(page_bytes=5000)) as port:
        head = await _run(
            "http_request", {"method": "HEAD", "url": f"http://127.0.0.1:{port}/echo"}
        )
        long = await _run("http_request", {"url": f"http://127.0.0.1:{port}/big", "max_chars": 100})

    assert head.value["body"] is None
    assert head.value["status"] == 200
    assert long.value["truncated"] is True
    assert long.value["body"] == ("<p>" + "word " * 19 + "</p>\n")[:100]


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"json": {}, "body": "x"}, "give either json or body, not both"),
        ({"headers": {"Host": "elsewhere"}}, "headers.Host: is set by the client"),
        ({"headers": {"X-A": "a\r\nInjected: 1"}}, "headers.X-A"),
        ({"headers": {"X-A": "naïve ☃"}}, "headers.X-A: has characters a header cannot carry"),
        ({"headers": {"X-A": {"secret": "MULTILINE"}}}, "headers.X-A: contains a line break"),
        ({"method": "TRACE"}, "method"),
        ({"headers": {"Bad Name": "x"}}, "headers"),
    ],
)
async def test_bad_requests_fail_as_invalid_arguments_without_showing_values(
    arguments: dict[str, Any], says: str
) -> None:
    result = await _run(
        "http_request",
        {"url": "http://127.0.0.1:9/", **arguments},
        secrets={"MULTILINE": "line one\nline two"},
    )

    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert result.error is not None
    assert says in result.error
    assert "line two" not in json.dumps(result.info.model_dump(mode="json"))
