"""`omniforge chat`: a conversation with an agent in the terminal, turn by turn, its steps and
streamed output shown as they happen.

It always talks to the HTTP API: a running server (`--server URL --token T`), or by default the
service itself started in this process on a free port of 127.0.0.1 (on the configured database,
the embedded SQLite by default), so a terminal conversation is exactly what any client gets."""

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO

from app.cli.wording import STRATEGY_LABELS, counted
from app.errors import OmniForgeError

if TYPE_CHECKING:
    import httpx

    from app.config import Settings

_EXIT_WORDS = {"/exit", "/quit", "exit", "quit"}
_SPEAKER = "agent> "
_PREVIEW_CHARS = 160


def add_command(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    chat = commands.add_parser(
        "chat", help="talk to an agent turn by turn, its steps and output shown live"
    )
    chat.add_argument("--agent", help="`name` or `name@N` (default: the built-in agent)")
    chat.add_argument(
        "--kind",
        help="the strategy of every turn (direct, cot, react, tot, mcts, plan, auto; "
        "default: the agent's)",
    )
    chat.add_argument(
        "--server", help="a running service's URL (default: one served by this process)"
    )
    chat.add_argument(
        "--token",
        default=os.environ.get("OMNIFORGE_TOKEN"),
        help="bearer token for --server (default: $OMNIFORGE_TOKEN)",
    )
    chat.add_argument(
        "--tenant", default="default", help="the tenant of an in-process chat (default: default)"
    )


def run(args: argparse.Namespace, settings: "Settings") -> int:
    try:
        return asyncio.run(
            chat(
                settings,
                agent=args.agent,
                kind=args.kind,
                server=args.server,
                token=args.token,
                tenant=args.tenant,
            )
        )
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


class ChatError(OmniForgeError):
    """A refusal of the service, or no service: one line for the user."""


async def chat(
    settings: "Settings",
    *,
    agent: str | None,
    server: str | None,
    token: str | None,
    tenant: str,
    kind: str | None = None,
    stdin: TextIO = sys.stdin,
    out: TextIO = sys.stdout,
) -> int:
    """Talks until end of input or `/exit`; returns 0, or 1 when the service refused."""
    try:
        if server is not None:
            if not token:
                raise ChatError("--server needs --token (or OMNIFORGE_TOKEN)")
            return await _talk(server, token, agent, kind, stdin, out)
        async with _local_service(settings) as base_url:
            token = _local_token(settings, tenant)
            return await _talk(base_url, token, agent, kind, stdin, out)
    except ChatError as exc:
        print(f"omniforge: {exc}", file=sys.stderr)
        return 1


async def _talk(
    base_url: str, token: str, agent: str | None, kind: str | None, stdin: TextIO, out: TextIO
) -> int:
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx.Timeout(30.0, read=None)
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout) as client:
        body: dict[str, Any] = {} if agent is None else {"agent": agent}
        try:
            response = await client.post("/api/v1/conversations", json=body)
        except httpx.HTTPError as exc:
            raise ChatError(f"cannot reach {base_url}: {exc}") from None
        conversation = _answer(response)
        print(
            f"OmniForge chat · agent {conversation['agent']} · conversation {conversation['id']}\n"
            "Type a message; an empty line is skipped, /exit or end of input ends the chat.",
            file=out,
            flush=True,
        )
        while True:
            print("you> ", end="", file=out, flush=True)
            line = await asyncio.to_thread(stdin.readline)
            if not line:
                print(file=out)
                return 0
            text = line.strip()
            if text in _EXIT_WORDS:
                return 0
            if text:
                await _turn(client, conversation["id"], text, kind, out)


async def _turn(
    client: "httpx.AsyncClient", conversation_id: str, text: str, kind: str | None, out: TextIO
) -> None:
    """Submits the turn with its stream as the answer and prints it as it comes."""
    from httpx_sse import aconnect_sse

    body: dict[str, Any] = {
        "input": text,
        "conversation_id": conversation_id,
        "stream_output": True,
    }
    if kind is not None:
        body["kind"] = kind
    printer = _TurnPrinter(out)
    async with aconnect_sse(client, "POST", "/api/v1/tasks", json=body) as source:
        if source.response.status_code >= 400:
            await source.response.aread()
            printer.refused(_problem(source.response))
            return
        async for event in source.aiter_sse():
            printer.event(event.event, event.json() if event.data else {})


class _TurnPrinter:
    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._streaming = False
        # The text the model's last reply typed in: a thought or an answer it holds is not
        # printed again.
        self._typed = ""
        # The LLM call (and its attempt) whose reply is typing in.
        self._source: tuple[object, object] = (None, None)
        self._llm_calls: set[str] = set()

    def event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "output_delta":
            if data.get("kind", "content") == "content":
                self._type_in(data)
            return
        self._end_stream()
        depth = data.get("depth")
        if depth:  # a sub-agent's: its steps, indented under the call that started it
            line = self._step(data.get("step", {})) if kind == "reasoning_step" else None
            if line:
                self._write(f"  {'  ' * int(depth)}{line}\n")
            return
        if kind == "reasoning_step":
            line = self._step(data.get("step", {}))
            if line:
                self._write(f"  {line}\n")
        elif kind == "chain_completed":
            answer = str(data.get("answer") or "")
            if not answer or answer.strip() != self._typed.strip():
                self._write(f"{_SPEAKER}{_indented(answer)}\n")
            self._write(f"  ({_totals(data.get('metrics', {}))})\n")
        elif kind == "chain_failed":
            self._write(
                f"{_SPEAKER}[failed: {data.get('error_code')}] {data.get('error_message')}\n"
                f"  ({_totals(data.get('metrics', {}))})\n"
            )

    def _type_in(self, data: dict[str, Any]) -> None:
        """Types in the model's reply as it streams, as the agent speaking: the answer is
        its last reply, so it is shown once, here, and not again when the run completes with
        it. A call retried after its stream broke off streams again from the start, on a
        line of its own."""
        source = (data.get("correlation_id"), data.get("attempt"))
        if self._streaming and source != self._source:
            self._end_stream()
        if not self._streaming:
            self._write(_SPEAKER)
            self._streaming = True
            self._source = source
            self._typed = ""
        text = str(data.get("delta", ""))
        self._typed += text
        self._write(_indented(text))

    def refused(self, message: str) -> None:
        self._write(f"  refused: {message}\n")

    def _step(self, step: dict[str, Any]) -> str | None:
        if step.get("type") == "tool_call":
            call = step["tool_call"]
            if call.get("tool_type") == "llm":
                self._llm_calls.add(call.get("correlation_id", ""))
                return None
            return f"→ {call.get('tool_name')} {_preview(call.get('arguments'))}"
        if step.get("type") == "tool_result":
            result = step["tool_result"]
            if result.get("correlation_id") in self._llm_calls:
                return None
            if result.get("success"):
                return f"← {_preview(result.get('result'))}"
            return f"← failed ({result.get('error_code')}): {result.get('error')}"
        if step.get("type") == "thinking":
            thought = str(step["thinking"].get("thought") or "").strip()
            event = step["thinking"].get("event")
            if event is not None:  # a strategy's record: what it is, then what it says
                return f"· [{STRATEGY_LABELS.get(event, event)}] {thought}"
            if thought and thought in self._typed:
                return None  # already typed in as the model wrote it
            return f"· {thought}"
        return None

    def _end_stream(self) -> None:
        if self._streaming:
            self._write("\n")
            self._streaming = False

    def _write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()


def _answer(response: "httpx.Response") -> dict[str, Any]:
    if response.status_code >= 400:
        raise ChatError(_problem(response))
    body: dict[str, Any] = response.json()
    return body


def _problem(response: "httpx.Response") -> str:
    try:
        problem = response.json()
    except ValueError:
        return f"HTTP {response.status_code}"
    detail = problem.get("detail") or problem.get("title") or f"HTTP {response.status_code}"
    fields = "; ".join(f"{e['field']}: {e['message']}" for e in problem.get("errors") or [])
    return f"{detail} ({fields})" if fields else str(detail)


def _totals(metrics: dict[str, Any]) -> str:
    return (
        f"{counted(int(metrics.get('llm_calls', 0)), 'LLM call')} · "
        f"{counted(int(metrics.get('total_tokens', 0)), 'token')} · "
        f"${metrics.get('total_cost_usd', '0')}"
    )


def _indented(text: str) -> str:
    """The agent's text, its further lines under its first (after `agent> `)."""
    return text.replace("\n", "\n" + " " * len(_SPEAKER))


def _preview(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…"


def _local_token(settings: "Settings", tenant: str) -> str:
    from datetime import timedelta

    from app.security import mint_token

    secret = settings.hs256_secret()
    if secret is None:
        raise ChatError(
            "this service accepts only its identity provider's tokens: use --server URL and --token"
        )
    return mint_token(
        secret,
        tenant_id=tenant,
        subject="cli",
        roles=["member"],
        ttl=timedelta(hours=12),
        issuer=settings.jwt_issuer or None,
        audience=settings.jwt_audience or None,
    )


@asynccontextmanager
async def _local_service(settings: "Settings") -> AsyncIterator[str]:
    """The service on a free port of 127.0.0.1 for as long as the chat lasts."""
    from app.api import create_app
    from app.api.serving import ServerDidNotStart, serve_locally
    from app.storage import Database, upgrade_to_head

    database = Database(settings.resolved_database_url())
    try:
        await upgrade_to_head(database)
    finally:
        await database.dispose()
    try:
        async with serve_locally(create_app(settings), backlog=64) as base_url:
            yield base_url
    except ServerDidNotStart:
        raise ChatError("the local service did not start (see the log above)") from None
