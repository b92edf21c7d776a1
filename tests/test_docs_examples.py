"""Every curl example of the documentation (docs/**/*.md and README.md) run as a reader runs it,
against a real service: the app on a real uvicorn, configured as a fresh install is (development,
SQLite, the offline `demo` model, no keys), with a real MCP server, a real A2A agent and a
webhook receiver on 127.0.0.1 for the pages that plug those in.

Each fenced `bash`/`sh` block that runs `curl` is one example. A page's examples run in page
order with `bash -euo pipefail`, each in the variables the ones before it set (create an agent,
then submit a task to it), with every `curl` failing on an HTTP error (`--fail-with-body`). A
block fenced right after an example with `title="Output"` is what the example prints: JSON is
checked as a subset of what it printed (`"…"` matches any value), text line by line in order
(`…` within a line matches anything).

One service for the module, on SQLite: the embedded default a fresh install serves, and the
cheapest database to make (a file, built by the migrations)."""

import asyncio
import json
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from app.api import create_app
from app.api.serving import serve_locally
from app.config import Settings
from tests.conftest import fresh_database
from tests.fakes.a2a_agent import TOKEN as AGENT_TOKEN
from tests.fakes.a2a_agent import FakeA2AAgent
from tests.fakes.mcp_server import TOKEN as MCP_TOKEN
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.service import JWT_SECRET, SECRETS_KEY

ROOT = Path(__file__).resolve().parent.parent
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
SHELLS = {"bash", "sh", "shell"}
# One example's whole run; it only ever waits for the service.
EXAMPLE_TIMEOUT_S = 60.0
ELLIPSIS = "…"

# Every example runs after this: `curl` fails on an HTTP error, showing the answer; what the
# page's earlier examples set is read back (`set -a` exports what this one sets, for the next).
PRELUDE = """\
curl() { command curl --fail-with-body --silent --show-error "$@"; }
set -a
if [ -s "$DOCS_STATE" ]; then source "$DOCS_STATE"; fi
"""
EPILOGUE = """
export -p | grep -Ev '^declare -x (PWD|OLDPWD|SHLVL|_)=' > "$DOCS_STATE"
"""

_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)\n"
    r"(?P=indent)(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class Expected:
    """What an example prints, as its page shows it."""

    language: str
    text: str


@dataclass(frozen=True)
class Example:
    page: Path
    line: int
    code: str
    expected: Expected | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def examples_of(page: Path) -> list[Example]:
    """The page's shell blocks that run `curl`, each with the output block that follows it."""
    text = page.read_text(encoding="utf-8")
    fences = list(_FENCE.finditer(text))
    found: list[Example] = []
    for index, fence in enumerate(fences):
        language = fence.group("info").strip().split(" ", 1)[0]
        body = _dedent(fence.group("body"), fence.group("indent"))
        if language not in SHELLS or not re.search(r"\bcurl\b", body):
            continue
        expected = None
        if index + 1 < len(fences):
            after = fences[index + 1]
            between = text[fence.end() : after.start()]
            info = after.group("info")
            if not between.strip() and 'title="Output' in info:
                expected = Expected(
                    info.strip().split(" ", 1)[0],
                    _dedent(after.group("body"), after.group("indent")),
                )
        line = text.count("\n", 0, fence.start()) + 1
        found.append(Example(page, line, body, expected))
    return found


def _dedent(body: str, indent: str) -> str:
    return "\n".join(line.removeprefix(indent) for line in body.split("\n"))


def pages_with_examples() -> Iterator[Any]:
    for page in PAGES:
        examples = examples_of(page)
        if examples:
            yield pytest.param(examples, id=str(page.relative_to(ROOT)))


# Expected output ----------------------------------------------------------------------------


def matches_json(expected: Any, actual: Any) -> bool:
    """`expected` within `actual`: objects by the keys shown, lists item by item (a last item
    `"…"` allows more), `"…"` for any value."""
    if expected == ELLIPSIS:
        return True
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and matches_json(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return False
        if expected and expected[-1] == ELLIPSIS:
            expected = expected[:-1]
            actual = actual[: len(expected)]
        return len(expected) == len(actual) and all(
            matches_json(e, a) for e, a in zip(expected, actual, strict=True)
        )
    return bool(expected == actual)


def json_values(text: str) -> list[Any]:
    """The JSON documents printed one after another (as `jq` prints them)."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return values
        value, position = decoder.raw_decode(text, position)
        values.append(value)


def matches_text(expected: str, actual: str) -> bool:
    """Every line shown, in order, among the lines printed; `…` within a line for any text."""
    lines = iter(actual.splitlines())
    for wanted in expected.splitlines():
        if not wanted.strip() or wanted.strip() == ELLIPSIS:
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in wanted.split(ELLIPSIS)))
        if not any(pattern.fullmatch(line) for line in lines):
            return False
    return True


def check_output(example: Example, output: str) -> None:
    expected = example.expected
    if expected is None:
        return
    if expected.language == "json":
        wanted = json_values(expected.text)
        printed = json_values(output)
        assert len(printed) == len(wanted), (
            f"{example.where}: printed {len(printed)} JSON documents, the page shows "
            f"{len(wanted)}:\n{output}"
        )
        for shown, got in zip(wanted, printed, strict=True):
            assert matches_json(shown, got), (
                f"{example.where}: printed\n{json.dumps(got, indent=2)}\nnot what the page "
                f"shows:\n{json.dumps(shown, indent=2)}"
            )
    else:
        assert matches_text(expected.text, output), (
            f"{example.where}: printed\n{output}\nnot what the page shows:\n{expected.text}"
        )


# The service and what the examples reach -------------------------------------------------


@dataclass
class Reader:
    """What a reader's shell has: the service's address and the variables the pages name."""

    env: dict[str, str]
    venv: Path


async def _mint(env: dict[str, str], *arguments: str) -> str:
    """A token, minted as the pages tell the reader to: `omniforge token`."""
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.prefix) / "bin" / "omniforge"),
        "token",
        *arguments,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode().strip()


@pytest.fixture(scope="module")
async def reader(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Reader]:
    directory = tmp_path_factory.mktemp("docs-service")
    async with (
        fresh_database("sqlite", directory) as database_url,
        FakeMcpServer() as mcp,
        FakeA2AAgent(token=AGENT_TOKEN) as remote_agent,
        WebhookReceiver() as receiver,
    ):
        settings = Settings(
            env="development",
            data_dir=directory,
            database_url=database_url,
            jwt_secret=SecretStr(JWT_SECRET),
            secrets_key=SecretStr(SECRETS_KEY),
            # The MCP server, the A2A agent and the webhook receiver listen on loopback: the
            # deployment's allow-list lets the tenants' tools reach it, as an operator's would
            # for services on its own network.
            network_allow=["127.0.0.1/32"],
        )
        app = create_app(settings)
        async with serve_locally(app) as base_url:
            env = {
                "PATH": os.environ["PATH"],
                "HOME": str(directory),
                "LANG": "C.UTF-8",
                "OMNIFORGE_URL": base_url,
                # What `omniforge` reads to mint tokens this service accepts.
                "OMNIFORGE_DATA_DIR": str(directory),
                "OMNIFORGE_DATABASE_URL": database_url,
                "OMNIFORGE_JWT_SECRET": JWT_SECRET,
                "OMNIFORGE_SECRETS_KEY": SECRETS_KEY,
                "MCP_URL": mcp.url,
                "MCP_TOKEN": MCP_TOKEN,
                "AGENT_CARD_URL": remote_agent.card_url,
                "AGENT_TOKEN": AGENT_TOKEN,
                "HOOK_URL": receiver.url("/omniforge"),
            }
            env["TOKEN"] = await _mint(env, "--tenant", "default", "--sub", "you")
            env["ADMIN"] = await _mint(
                env, "--tenant", "default", "--sub", "admin", "--roles", "tenant_admin"
            )
            env["PLATFORM"] = await _mint(
                env, "--tenant", "default", "--sub", "operator", "--roles", "platform_admin"
            )
            yield Reader(env, Path(sys.prefix))


async def run_example(example: Example, reader: Reader, workdir: Path, state: Path) -> str:
    """Runs one example in `workdir`; its output, once it succeeded."""
    out, err = workdir / ".stdout", workdir / ".stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            "bash",
            "-euo",
            "pipefail",
            "-c",
            PRELUDE + example.code + EPILOGUE,
            cwd=workdir,
            env={**reader.env, "DOCS_STATE": str(state)},
            stdout=stdout,
            stderr=stderr,
        )
        # Its exit alone: a stream an example left open (to watch for one event) ends with
        # the service, and must not hold the example up.
        try:
            code = await asyncio.wait_for(process.wait(), EXAMPLE_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise AssertionError(
                f"{example.where}: still running after {EXAMPLE_TIMEOUT_S} s"
            ) from None
    printed = out.read_text(encoding="utf-8")
    assert code == 0, (
        f"{example.where} failed (exit {code}):\n{example.code}\n--- stdout\n{printed}\n"
        f"--- stderr\n{err.read_text(encoding='utf-8')}"
    )
    return printed


# The tests ----------------------------------------------------------------------------------


def test_the_pages_have_examples_and_the_readme_its_tour() -> None:
    assert shutil.which("curl"), "the examples use curl"
    assert shutil.which("jq"), "the examples use jq"
    readme = examples_of(ROOT / "README.md")
    assert len(readme) >= 4, "the README's tour: a token, a task, its stream, its chain"
    assert all(example.expected is not None for example in readme)
    documented = [page for page in PAGES if examples_of(page)]
    assert len(documented) >= 15, [str(page) for page in documented]


@pytest.mark.parametrize("examples", list(pages_with_examples()))
async def test_every_example_of_the_page_runs_as_shown(
    examples: list[Example], reader: Reader, tmp_path: Path
) -> None:
    """Each example of the page, in page order, succeeds and prints what the page shows."""
    (tmp_path / ".venv").symlink_to(reader.venv)
    state = tmp_path / ".state"
    for example in examples:
        check_output(example, await run_example(example, reader, tmp_path, state))


def test_output_checks_hold_what_they_say() -> None:
    """The output matchers: a subset of JSON with `…` for any value, lines in order."""
    assert matches_json({"status": "completed", "id": ELLIPSIS}, {"status": "completed", "id": 1})
    assert not matches_json({"status": "completed"}, {"status": "failed"})
    assert matches_json([1, ELLIPSIS], [1, 2, 3])
    assert not matches_json([1], [1, 2])
    assert json_values('{"a": 1}\n"b"\n') == [{"a": 1}, "b"]
    assert matches_text("id: 1\n…\nevent: done", "id: 1\nevent: x\nevent: done\n")
    assert matches_text('data: {…"answer":"395"…}', 'data: {"x":1,"answer":"395","y":2}')
    assert not matches_text("event: done\nid: 1", "id: 1\nevent: done")
