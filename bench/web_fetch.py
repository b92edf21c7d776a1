"""`web_fetch` of a 1 MB HTML page from a loopback server the run's policy allows, through the
whole executor (guard, pinned connection, streamed download with progress, HTML to Markdown in
a worker thread, recorded steps); the download alone (guard, connection, body) is measured
beside it, so the reading's share shows."""

import asyncio
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import quantiles

import httpx

from app.chain import ReasoningChain
from app.tools.builtin.web import MAX_CHARS, WebFetchTool
from app.tools.executor import ToolExecutor
from app.tools.models import ToolCallContext
from app.tools.net import DEFAULT_USER_AGENT, SsrfGuard, WebClient
from app.tools.registry import ToolRegistry
from app.tools.services import NetworkPolicy, ToolServices

PAGE_BYTES = 1024 * 1024
POLICY = NetworkPolicy.of(["127.0.0.1/32"])


@dataclass(frozen=True)
class Series:
    """One kind of call, timed: `label`, characters of text returned, wall times in ms."""

    label: str
    chars: int
    ms: list[float]

    def p(self, percent: int) -> float:
        return quantiles(sorted(self.ms), n=100, method="inclusive")[percent - 1]

    def mb_per_s(self, page_bytes: int) -> float:
        return page_bytes / 1_000_000 / (self.p(50) / 1000)


@dataclass(frozen=True)
class WebFetchFigures:
    runs: int
    page_bytes: int
    progress_reports: int
    series: list[Series]


def page(size: int = PAGE_BYTES) -> bytes:
    """An article-like HTML page of `size` bytes: headings, paragraphs with links and
    emphasis, lists, a navigation bar and a script the reading drops."""
    head = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Benchmark article</title>"
        "<script>var analytics = {};</script><style>body{font:14px serif}</style></head><body>"
        "<nav><a href='/'>Home</a> <a href='/docs'>Docs</a></nav><main>"
    )
    section = (
        "<h2>Section {n}</h2><p>The <em>quick</em> brown fox jumps over the lazy dog; see "
        "<a href='https://example.com/ref/{n}'>reference {n}</a> for the <strong>details"
        "</strong> of this paragraph, which goes on for a while to look like real prose.</p>"
        "<ul><li>first point of {n}</li><li>second point of {n}</li></ul>\n"
    )
    tail = "</main></body></html>\n"
    parts = [head]
    used = len(head) + len(tail)
    n = 0
    while True:
        n += 1
        piece = section.format(n=n)
        if used + len(piece) > size:
            break
        parts.append(piece)
        used += len(piece)
    parts.append(" " * (size - used) + tail)  # exactly `size` bytes (all ASCII)
    return "".join(parts).encode()


class _StaticServer:
    """`python -m http.server` in its own process, serving one file from a temporary folder."""

    def __init__(self, body: bytes) -> None:
        self._folder = tempfile.TemporaryDirectory()
        (Path(self._folder.name) / "page.html").write_bytes(body)
        self._process = subprocess.Popen(
            [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"],
            cwd=self._folder.name,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        found = re.search(r"port (\d+)", line)
        if found is None:
            self.close()
            raise RuntimeError(f"the static server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{found.group(1)}/page.html"

    def close(self) -> None:
        self._process.terminate()
        self._process.wait(timeout=5)
        self._folder.cleanup()


async def _fetches(url: str, runs: int, max_chars: int | None) -> tuple[Series, int]:
    """`runs` web_fetch calls through the executor (after 3 warm-up calls), and how many
    progress reports each made."""
    executor = ToolExecutor(ToolRegistry([WebFetchTool()]))
    services = ToolServices(network=POLICY)
    arguments: dict[str, object] = {"url": url}
    if max_chars is not None:
        arguments["max_chars"] = max_chars
    reports: list[object] = []
    times: list[float] = []
    chars = 0
    for index in range(runs + 3):
        chain = ReasoningChain(task_id="bench", agent_id="bench")
        context = ToolCallContext(
            task_id="bench",
            agent_id="bench",
            chain_id=chain.id,
            services=services,
            on_progress=reports.append,
        )
        started = time.perf_counter()
        result = await executor.execute(chain, context, "web_fetch", arguments)
        elapsed = (time.perf_counter() - started) * 1000
        if not result.success:
            raise RuntimeError(f"web_fetch failed: {result.error}")
        if index >= 3:
            times.append(elapsed)
            chars = len(result.value["content"])
    label = f"web_fetch, max_chars={max_chars or 'default'}"
    return Series(label, chars, times), len(reports) // (runs + 3)


async def _downloads(url: str, runs: int) -> Series:
    """The download alone: guard, pinned connection, streamed body (no reading, no steps)."""
    ssl_context = httpx.create_ssl_context(trust_env=False)
    times: list[float] = []
    for index in range(runs + 3):
        started = time.perf_counter()
        async with WebClient(
            SsrfGuard(POLICY),
            ssl_context,
            tool="web_fetch",
            max_bytes=5 * PAGE_BYTES,
            timeout_s=20,
            user_agent=DEFAULT_USER_AGENT,
        ) as client:
            fetched = await client.request("GET", url)
        elapsed = (time.perf_counter() - started) * 1000
        if len(fetched.body) != PAGE_BYTES:
            raise RuntimeError(f"downloaded {len(fetched.body)} bytes, not {PAGE_BYTES}")
        if index >= 3:
            times.append(elapsed)
    return Series("download only (guard + pinned connection + body)", 0, times)


async def _measure(url: str, runs: int) -> WebFetchFigures:
    default, reports = await _fetches(url, runs, None)
    widest, _ = await _fetches(url, runs, MAX_CHARS)
    download = await _downloads(url, runs)
    return WebFetchFigures(runs, PAGE_BYTES, reports, [default, widest, download])


def run(runs: int = 50) -> WebFetchFigures:
    server = _StaticServer(page())
    try:
        return asyncio.run(_measure(server.url, runs))
    finally:
        server.close()
