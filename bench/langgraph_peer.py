"""LangGraph's dev server (`langgraph dev`, its in-memory runtime), the peer of `scripts/bench
startup`: installed from `bench/peers/langgraph.lock` (exact versions, hashes) into
`.bench/peers/langgraph`, made once and reused; a one-node graph project written for it; its
telemetry, version check, tracing and browser switched off."""

import hashlib
import http.client
import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

from bench.server_start import Start, start_server

ROOT = Path(__file__).resolve().parent.parent
PEER_LOCK = Path(__file__).resolve().parent / "peers" / "langgraph.lock"
PEER_VENV = ROOT / ".bench" / "peers" / "langgraph"
PEER_VERSIONS = ("langgraph-cli", "langgraph-api", "langgraph-runtime-inmem", "langgraph")
TASK_TIMEOUT_S = 60.0
QUESTION = "What is 17 * 23 + 4?"

# The peer's network features, off: usage analytics, the PyPI version check, LangSmith tracing
# (and with it the Studio organisation look-up); `--no-browser` keeps it from opening Studio.
PEER_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_API_KEY": "",
}

PEER_GRAPH = '''"""One node that echoes its input: the smallest graph `langgraph dev` serves."""

from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    text: str


def echo(state: State) -> State:
    return {"text": state["text"]}


builder = StateGraph(State)
builder.add_node("echo", echo)
builder.add_edge(START, "echo")
builder.add_edge("echo", END)
graph = builder.compile()
'''
PEER_CONFIG = {"dependencies": ["."], "graphs": {"echo": "./graph.py:graph"}}


class PeerUnavailable(Exception):
    """LangGraph's dev server could not be installed here."""


def install() -> Path:
    """`langgraph` of the peer's virtualenv, made (from the lock, hash-checked) unless the
    one there was made from this lock."""
    digest = hashlib.sha256(PEER_LOCK.read_bytes()).hexdigest()[:16]
    stamp = PEER_VENV / f".installed-{digest}"
    langgraph = PEER_VENV / "bin" / "langgraph"
    if stamp.exists() and langgraph.exists():
        return langgraph
    print(f"  (installing the peer into {PEER_VENV.relative_to(ROOT)}…)", flush=True)
    shutil.rmtree(PEER_VENV, ignore_errors=True)
    venv.EnvBuilder(with_pip=True).create(PEER_VENV)
    pip = [
        str(PEER_VENV / "bin" / "python"),
        *("-m", "pip", "install", "--quiet", "--disable-pip-version-check"),
        *("--no-deps", "--require-hashes", "--requirement", str(PEER_LOCK)),
    ]
    done = subprocess.run(pip, capture_output=True, text=True)
    if done.returncode != 0:
        raise PeerUnavailable(f"pip could not install {PEER_LOCK.name}: {done.stderr[-800:]}")
    stamp.touch()
    return langgraph


def versions() -> dict[str, str]:
    names = ", ".join(repr(name) for name in PEER_VERSIONS)
    script = f"from importlib.metadata import version; print(*(version(n) for n in ({names},)))"
    done = subprocess.run(
        [str(PEER_VENV / "bin" / "python"), "-c", script],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(zip(PEER_VERSIONS, done.stdout.split(), strict=True))


def write_project(directory: Path) -> None:
    directory.mkdir(parents=True)
    (directory / "graph.py").write_text(PEER_GRAPH, encoding="utf-8")
    (directory / "langgraph.json").write_text(json.dumps(PEER_CONFIG), encoding="utf-8")


def starts(langgraph: Path, project: Path) -> tuple[Start, Start]:
    """A fresh start (the state it persists in the project removed first) measured to idle,
    then a restart on that state whose first run is made the moment it is ready."""
    shutil.rmtree(project / ".langgraph_api", ignore_errors=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_"))
    }
    env.update(PEER_ENV)
    command = [str(langgraph), "dev", "--no-browser", "--port"]
    fresh = start_server(command, env, project, "/ok", idle=True)
    restart = start_server(command, env, project, "/ok", task=_run_echo)
    return fresh, restart


def _run_echo(port: int) -> None:
    """A stateless run of the graph, answered when it ends."""
    body = json.dumps({"assistant_id": "echo", "input": {"text": QUESTION}})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TASK_TIMEOUT_S)
    try:
        connection.request("POST", "/runs/wait", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = response.read()
        if response.status != 200 or json.loads(answer).get("text") != QUESTION:
            raise RuntimeError(f"the peer's run failed: {response.status} {answer[:300]!r}")
    finally:
        connection.close()
