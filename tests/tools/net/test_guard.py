"""The SSRF guard through the web tools: refused destinations fail with a clear
`destination_refused` step and no connection (a listening socket on the address sees none),
every redirect is re-checked, an allow-listed loopback server is reached, and the connection
dials the address that was checked (the name is never looked up again)."""

from collections.abc import Iterable, Iterator

import pytest
from aiohttp import web

from app.chain import ErrorCode, ReasoningChain
from app.tools.builtin.web import HttpRequestTool, WebFetchTool
from app.tools.executor import ToolExecutor
from app.tools.net import IPAddress, system_resolver
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult
from tests.tools.net.servers import Listener, ScriptedResolver, context, serve

# Names only this test knows, as a resolver the tool is given would answer them.
NAMES = {
    "internal.example": ["127.0.0.1"],
    "mixed.example": ["93.184.216.34", "10.0.0.7"],
    "metadata.example": ["169.254.169.254"],
    "loopback2.example": ["127.0.0.2"],
}


async def _resolver(host: str, port: int) -> list[IPAddress]:
    scripted = ScriptedResolver(NAMES)
    if host in NAMES:
        return await scripted(host, port)
    return await system_resolver(host, port)


async def _call(
    url: str, allow: Iterable[str] = (), *, tool: str = "web_fetch", **arguments: object
) -> ToolResult:
    chain = ReasoningChain(task_id="t", agent_id="a")
    registry = ToolRegistry([WebFetchTool(resolver=_resolver), HttpRequestTool(resolver=_resolver)])
    call = {"url": url, **arguments}
    return await ToolExecutor(registry).execute(chain, context(allow), tool, call)


LOOPBACK = "a loopback address; to let tools reach it, add 127.0.0.1 (or a network containing it)"
METADATA = "169.254.169.254 is a cloud metadata endpoint; no allow-list opens it"
# (URL, what the error says). {port} is a socket listening on 127.0.0.1, {port6} on ::1.
REFUSED = [
    ("http://127.0.0.1:{port}/", f"127.0.0.1 is {LOOPBACK}"),
    ("http://2130706433:{port}/", f"2130706433 is 127.0.0.1, {LOOPBACK}"),
    ("http://0x7f.1:{port}/", f"0x7f.1 is 127.0.0.1, {LOOPBACK}"),
    ("http://0x7f000001:{port}/", f"0x7f000001 is 127.0.0.1, {LOOPBACK}"),
    ("http://017700000001:{port}/", f"017700000001 is 127.0.0.1, {LOOPBACK}"),
    ("http://127.1:{port}/", f"127.1 is 127.0.0.1, {LOOPBACK}"),
    ("http://127.0.0.1.:{port}/", f"127.0.0.1. is 127.0.0.1, {LOOPBACK}"),
    ("http://[::ffff:127.0.0.1]:{port}/", f"::ffff:127.0.0.1 is 127.0.0.1, {LOOPBACK}"),
    ("http://[::ffff:7f00:1]:{port}/", f"::ffff:7f00:1 is 127.0.0.1, {LOOPBACK}"),
    ("http://localhost:{port}/", f"localhost is 127.0.0.1, {LOOPBACK}"),
    ("http://LocalHost:{port}/", f"localhost is 127.0.0.1, {LOOPBACK}"),
    ("http://internal.example:{port}/", f"internal.example is 127.0.0.1, {LOOPBACK}"),
    ("http://mixed.example:{port}/", "mixed.example is 10.0.0.7, a private address"),
    ("http://0.0.0.0:{port}/", "0.0.0.0 is the unspecified address (it reaches this machine)"),
    ("http://0:{port}/", "0 is 0.0.0.0, the unspecified address"),
    ("http://[::1]:{port6}/", "::1 is a loopback address"),
    ("http://[::]:{port6}/", ":: is the unspecified address"),
    ("http://[::127.0.0.1]:{port}/", "the IPv4-compatible form of 127.0.0.1, a loopback address"),
    ("http://[64:ff9b::7f00:1]:{port}/", "the NAT64 form of 127.0.0.1, a loopback address"),
    ("http://[2002:7f00:1::]:{port}/", "the 6to4 form of 127.0.0.1, a loopback address"),
    ("http://169.254.169.254/latest/meta-data/", METADATA),
    ("http://[::ffff:169.254.169.254]/latest/meta-data/", "is 169.254.169.254, a cloud metadata"),
    ("http://0xa9fea9fe/latest/meta-data/", "0xa9fea9fe is 169.254.169.254, a cloud metadata"),
    ("http://metadata.example/", "metadata.example is 169.254.169.254, a cloud metadata"),
    ("http://169.254.10.1/", "169.254.10.1 is a link-local address"),
    ("http://10.0.0.1/", "10.0.0.1 is a private address"),
    ("http://172.16.5.4:8080/", "172.16.5.4 is a private address"),
    ("http://192.168.0.1/", "192.168.0.1 is a private address"),
    ("http://100.64.0.1/", "100.64.0.1 is a shared (carrier-grade NAT) address"),
    ("http://224.0.0.251/", "224.0.0.251 is a multicast address"),
    ("http://240.0.0.1/", "240.0.0.1 is a reserved address"),
    ("http://[fd00::1]/", "fd00::1 is a unique-local (private) address"),
    ("http://[fe80::1]/", "fe80::1 is a link-local address"),
    ("http://[ff02::1]/", "ff02::1 is a multicast address"),
    ("file:///etc/passwd", "'file:'; only http and https URLs"),
    ("gopher://127.0.0.1:{port}/", "'gopher:'; only http and https URLs"),
    ("http://user:secret@example.com/", "a URL may not carry credentials"),
]


@pytest.fixture
def listeners() -> Iterator[tuple[Listener, Listener]]:
    with Listener("127.0.0.1") as v4, Listener("::1") as v6:
        yield v4, v6


@pytest.mark.parametrize(("url", "says"), REFUSED, ids=[row[0] for row in REFUSED])
async def test_refused_destinations_fail_clearly_and_nothing_is_connected(
    listeners: tuple[Listener, Listener], url: str, says: str
) -> None:
    v4, v6 = listeners
    target = url.format(port=v4.port, port6=v6.port)

    result = await _call(target)

    assert not result.success
    assert result.error_code is ErrorCode.DESTINATION_REFUSED
    assert result.error is not None
    assert says in result.error
    assert v4.connections() == 0
    assert v6.connections() == 0


async def test_http_request_is_refused_the_same_way(listeners: tuple[Listener, Listener]) -> None:
    v4, _ = listeners

    result = await _call(f"http://0x7f.1:{v4.port}/", ["0x7f.1"], tool="http_request")

    assert result.error_code is ErrorCode.DESTINATION_REFUSED
    assert result.error is not None
    assert f"0x7f.1 is 127.0.0.1, {LOOPBACK}" in result.error
    assert v4.connections() == 0


async def test_a_host_the_resolver_does_not_read_as_a_number_is_invalid_not_reached(
    listeners: tuple[Listener, Listener],
) -> None:
    v4, _ = listeners

    result = await _call(f"http://0177.0.0.1:{v4.port}/")

    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert result.error is not None
    assert "is not a valid URL" in result.error
    assert v4.connections() == 0


async def test_no_allow_list_opens_the_metadata_endpoint() -> None:
    result = await _call("http://169.254.169.254/latest/meta-data/", ["169.254.0.0/16"])

    assert result.error_code is ErrorCode.DESTINATION_REFUSED
    assert result.error is not None
    assert METADATA in result.error


Redirect = tuple[int, str]


def _app(routes: dict[str, Redirect | str]) -> web.Application:
    """Each path answers with its redirect (status, location) or a text page."""
    app = web.Application()
    for path, answer in routes.items():

        async def handle(request: web.Request, answer: Redirect | str = answer) -> web.Response:
            if isinstance(answer, str):
                return web.Response(text=answer, content_type="text/html")
            status, location = answer
            return web.Response(status=status, headers={"Location": location})

        app.router.add_get(path, handle)
    return app


def _redirect(location: str, status: int = 302) -> Redirect:
    return status, location


async def test_an_allow_listed_loopback_server_is_reached() -> None:
    async with serve(_app({"/": "<h1>Hello</h1>"})) as port:
        result = await _call(f"http://127.0.0.1:{port}/", ["127.0.0.1/32"])

    assert result.success, result.error
    assert result.value["status"] == 200
    assert result.value["content"] == "# Hello"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirect_to_the_metadata_address_is_refused(status: int) -> None:
    metadata = "http://169.254.169.254/latest/meta-data/"
    async with serve(_app({"/go": _redirect(metadata, status)})) as port:
        result = await _call(f"http://127.0.0.1:{port}/go", ["127.0.0.1/32"])

    assert result.error_code is ErrorCode.DESTINATION_REFUSED
    assert result.error is not None
    assert f"refused {metadata} (a redirect from http://127.0.0.1:{port}/go)" in result.error
    assert METADATA in result.error


@pytest.mark.parametrize("host", ["127.0.0.2", "loopback2.example", "[::ffff:127.0.0.2]"])
async def test_a_redirect_to_a_loopback_address_not_allowed_connects_nowhere(host: str) -> None:
    with Listener("127.0.0.2") as hidden:
        target = f"http://{host}:{hidden.port}/admin"
        async with serve(_app({"/go": _redirect(target)})) as port:
            result = await _call(f"http://127.0.0.1:{port}/go", ["127.0.0.1/32"])

        assert result.error_code is ErrorCode.DESTINATION_REFUSED
        assert result.error is not None
        assert "127.0.0.2" in result.error
        assert "a loopback address" in result.error
        assert f"(a redirect from http://127.0.0.1:{port}/go)" in result.error
        assert hidden.connections() == 0


async def test_redirects_are_followed_and_the_final_url_reported() -> None:
    app = _app({"/a": _redirect("/b", 301), "/b": _redirect("/c", 307), "/c": "<p>there</p>"})
    async with serve(app) as port:
        result = await _call(f"http://127.0.0.1:{port}/a", ["127.0.0.1/32"])

    assert result.success, result.error
    assert result.value["final_url"] == f"http://127.0.0.1:{port}/c"
    assert result.value["content"] == "there"


async def test_more_than_five_redirects_are_not_followed() -> None:
    app = _app({f"/{n}": _redirect(f"/{n + 1}") for n in range(6)} | {"/6": "end"})
    async with serve(app) as port:
        followed = await _call(f"http://127.0.0.1:{port}/1", ["127.0.0.1/32"])
        refused = await _call(f"http://127.0.0.1:{port}/0", ["127.0.0.1/32"])

    assert followed.success, followed.error
    assert not refused.success
    assert refused.error == f"http://127.0.0.1:{port}/0 redirected more than 5 times; not followed"


async def test_the_connection_dials_the_checked_address_without_a_second_lookup() -> None:
    # A rebinding name: first 127.0.0.1 (allowed, where the server is), then 127.0.0.2,
    # where a socket listens on the same port. Only the first answer may ever be dialled.
    async with serve(_app({"/": "<p>pinned</p>"})) as port:
        with Listener("127.0.0.2", port) as rebound:
            resolver = ScriptedResolver(
                {"rebind.example": ["127.0.0.1"]}, later={"rebind.example": ["127.0.0.2"]}
            )
            chain = ReasoningChain(task_id="t", agent_id="a")
            registry = ToolRegistry([WebFetchTool(resolver=resolver)])
            result = await ToolExecutor(registry).execute(
                chain,
                context(["127.0.0.0/8"]),
                "web_fetch",
                {"url": f"http://rebind.example:{port}/"},
            )

            assert result.success, result.error
            assert result.value["content"] == "pinned"
            assert resolver.lookups == ["rebind.example"]
            assert rebound.connections() == 0


async def test_the_host_header_keeps_the_name_while_the_checked_address_is_dialled() -> None:
    seen: list[str] = []

    async def echo_host(request: web.Request) -> web.Response:
        seen.append(request.headers["Host"])
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", echo_host)
    async with serve(app) as port:
        resolver = ScriptedResolver({"named.example": ["127.0.0.1"]})
        chain = ReasoningChain(task_id="t", agent_id="a")
        registry = ToolRegistry([WebFetchTool(resolver=resolver)])
        result = await ToolExecutor(registry).execute(
            chain, context(["127.0.0.1"]), "web_fetch", {"url": f"http://named.example:{port}/"}
        )

    assert result.success, result.error
    assert seen == [f"named.example:{port}"]
