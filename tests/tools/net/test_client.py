"""The guarded client: the body is cut at the byte cap and says so, redirects change the method
as browsers do and drop the caller's headers when they leave the first origin, and TLS is
verified against the name although the checked address is dialled."""

import asyncio
import ssl
from pathlib import Path

import httpcore
import httpx
import pytest
from aiohttp import web

from app.chain import ErrorCode
from app.tools.errors import ErrorClass, ToolError
from app.tools.net import DEFAULT_USER_AGENT, PinnedBackend, SsrfGuard, WebClient
from app.tools.services import NetworkPolicy
from tests.tools.net.servers import ScriptedResolver, self_signed, serve

LOOPBACK_ONLY = NetworkPolicy.of(["127.0.0.1/32"])


def _client(
    *,
    max_bytes: int = 1024 * 1024,
    resolver: ScriptedResolver | None = None,
    ssl_context: ssl.SSLContext | None = None,
    timeout_s: float = 10.0,
    policy: NetworkPolicy = LOOPBACK_ONLY,
) -> WebClient:
    guard = SsrfGuard(policy, resolver) if resolver else SsrfGuard(policy)
    return WebClient(
        guard,
        ssl_context or httpx.create_ssl_context(trust_env=False),
        tool="web_fetch",
        max_bytes=max_bytes,
        timeout_s=timeout_s,
        user_agent=DEFAULT_USER_AGENT,
    )


def _bytes_app(size: int, *, chunked: bool = False) -> web.Application:
    async def body(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        if not chunked:
            response.content_length = size
        await response.prepare(request)
        sent = 0
        while sent < size:
            piece = min(64 * 1024, size - sent)
            await response.write(b"x" * piece)
            sent += piece
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/", body)
    return app


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_body_larger_than_the_cap_is_cut_at_the_cap_and_says_so(chunked: bool) -> None:
    async with serve(_bytes_app(3 * 1024 * 1024, chunked=chunked)) as port, _client() as client:
        fetched = await client.request("GET", f"http://127.0.0.1:{port}/")

    assert fetched.truncated
    assert len(fetched.body) == 1024 * 1024
    assert fetched.status == 200


async def test_a_body_exactly_at_the_cap_is_whole() -> None:
    async with serve(_bytes_app(1024 * 1024)) as port, _client() as client:
        fetched = await client.request("GET", f"http://127.0.0.1:{port}/")

    assert not fetched.truncated
    assert len(fetched.body) == 1024 * 1024


async def test_progress_is_given_bytes_read_and_the_content_length() -> None:
    seen: list[tuple[int, int, int | None]] = []
    async with serve(_bytes_app(300_000)) as port, _client() as client:
        await client.request(
            "GET", f"http://127.0.0.1:{port}/", on_progress=lambda *args: seen.append(args)
        )

    assert seen[-1] == (300_000, 300_000, 300_000)
    assert [read for read, _, _ in seen] == sorted(read for read, _, _ in seen)


def _recording_app(seen: list[tuple[str, str, dict[str, str], bytes]]) -> web.Application:
    async def record(request: web.Request) -> web.Response:
        seen.append((request.method, request.path, dict(request.headers), await request.read()))
        target = request.query.get("to")
        if target is not None:
            return web.Response(status=int(request.query["status"]), headers={"Location": target})
        return web.Response(text="done")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    return app


@pytest.mark.parametrize(
    ("status", "method", "then"),
    [(303, "POST", "GET"), (302, "POST", "GET"), (301, "POST", "GET"), (307, "POST", "POST"),
     (308, "PUT", "PUT"), (303, "HEAD", "HEAD"), (302, "DELETE", "DELETE")],
)  # fmt: skip
async def test_redirects_change_the_method_as_browsers_do(
    status: int, method: str, then: str
) -> None:
    seen: list[tuple[str, str, dict[str, str], bytes]] = []
    async with serve(_recording_app(seen)) as port, _client() as client:
        fetched = await client.request(
            method, f"http://127.0.0.1:{port}/a?to=/b&status={status}", content=b"payload"
        )

    assert fetched.status == 200
    assert fetched.redirects == 1
    [(_, _, _, first_body), (second_method, path, _, second_body)] = seen
    assert (second_method, path) == (then, "/b")
    assert first_body == b"payload"
    assert second_body == (b"payload" if then == method and status != 303 else b"")


async def test_the_callers_headers_do_not_follow_a_redirect_to_another_origin() -> None:
    seen: list[tuple[str, str, dict[str, str], bytes]] = []
    other: list[tuple[str, str, dict[str, str], bytes]] = []
    async with (
        serve(_recording_app(seen)) as port,
        serve(_recording_app(other)) as elsewhere,
        _client() as client,
    ):
        await client.request(
            "GET", f"http://127.0.0.1:{port}/a?to=/b&status=302", headers={"X-Api-Key": "k-123"}
        )
        await client.request(
            "GET",
            f"http://127.0.0.1:{port}/a?to=http://127.0.0.1:{elsewhere}/c&status=302",
            headers={"X-Api-Key": "k-123"},
        )

    assert [headers.get("X-Api-Key") for _, _, headers, _ in seen] == ["k-123"] * 3
    [(_, path, headers, _)] = other
    assert path == "/c"
    assert "X-Api-Key" not in headers
    assert headers["User-Agent"] == DEFAULT_USER_AGENT


async def test_a_server_that_does_not_answer_in_time_is_a_timeout() -> None:
    never = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await never.wait()
        return web.Response(text="late")

    app = web.Application()
    app.router.add_get("/", hang)
    async with serve(app) as port, _client(timeout_s=0.2) as client:
        with pytest.raises(ToolError) as raised:
            await client.request("GET", f"http://127.0.0.1:{port}/")
        never.set()

    assert raised.value.error_class is ErrorClass.TIMEOUT
    assert "did not answer in time" in raised.value.message


async def test_a_closed_port_is_a_transient_connection_failure() -> None:
    async with serve(web.Application()) as port:
        pass  # the port is free again

    async with _client() as client:
        with pytest.raises(ToolError) as raised:
            await client.request("GET", f"http://127.0.0.1:{port}/")

    assert raised.value.error_class is ErrorClass.TRANSIENT
    assert raised.value.message.startswith(f"could not connect to 127.0.0.1:{port}")


async def test_tls_is_verified_against_the_name_while_the_checked_address_is_dialled(
    tmp_path: Path,
) -> None:
    server_tls, client_tls = self_signed("pinned.example", tmp_path)
    app = web.Application()

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text=f"hello {request.host}")

    app.router.add_get("/", hello)
    resolver = ScriptedResolver({"pinned.example": ["127.0.0.1"]})
    async with serve(app, ssl_context=server_tls) as port:
        async with _client(resolver=resolver, ssl_context=client_tls) as client:
            fetched = await client.request("GET", f"https://pinned.example:{port}/")
        async with _client(resolver=resolver, ssl_context=client_tls) as client:
            with pytest.raises(ToolError) as raised:
                await client.request("GET", f"https://127.0.0.1:{port}/")

    assert fetched.body == f"hello pinned.example:{port}".encode()
    assert raised.value.message.startswith(f"TLS with 127.0.0.1:{port} failed")
    assert "CERTIFICATE_VERIFY_FAILED" in raised.value.message
    assert raised.value.error_class is ErrorClass.PERMANENT


async def test_a_host_the_guard_did_not_check_is_never_dialled() -> None:
    backend = PinnedBackend()
    with pytest.raises(httpcore.ConnectError, match="was not checked by the SSRF guard"):
        await backend.connect_tcp("example.com", 80)


async def test_an_invalid_redirect_location_is_a_clear_failure() -> None:
    seen: list[tuple[str, str, dict[str, str], bytes]] = []
    async with serve(_recording_app(seen)) as port, _client() as client:
        with pytest.raises(ToolError) as raised:
            await client.request("GET", f"http://127.0.0.1:{port}/a?to=http://[::1&status=302")

    assert "redirected to an invalid URL" in raised.value.message
    assert raised.value.error_code is not ErrorCode.INTERNAL_ERROR
