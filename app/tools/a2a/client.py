"""Calling a remote A2A agent with the official `a2a-sdk` client, over HTTP that passes our SSRF
guard: its card fetched (`A2AConnector.fetch_card`), a message sent and the remote task's
updates followed as they stream (`A2AConnector.call`), the task cancelled when our call is.

The client speaks JSON-RPC or HTTP+JSON, whichever the card lists first; it streams
(`SendStreamingMessage`) unless the card says the agent does not, and then sends one blocking
`SendMessage`. Each update is handed on as a `RemoteUpdate` while the call runs."""

import asyncio
import contextlib
import json
import logging
import ssl
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, cast

import httpx
from a2a.extensions.common import HTTP_EXTENSION_HEADER
from a2a.helpers import get_artifact_text, get_message_text
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from google.protobuf.struct_pb2 import Struct  # type: ignore[import-untyped]

from app.chain import ErrorCode
from app.ids import uuid4
from app.tools.a2a.cards import (
    BINDINGS,
    CardRefused,
    Origin,
    at_origin,
    card_location,
    origin_of,
    parse_card,
)
from app.tools.a2a.extension import EXTENSION_URI, FamilyUsage, hop_metadata
from app.tools.a2a.transport import GuardedTransport
from app.tools.errors import ToolError, ToolTimeoutError
from app.tools.net import Resolver, SsrfGuard, WebClient, system_resolver
from app.tools.services import NetworkPolicy

if TYPE_CHECKING:
    from a2a.client import Client

logger = logging.getLogger(__name__)

MAX_CARD_BYTES = 1024 * 1024
# How long a CancelTask sent for a call we stop may take: the call's own end waits for it.
CANCEL_TIMEOUT_S = 5.0
USER_AGENT = "OmniForge/0.1 (A2A client)"
MAX_UPDATE_CHARS = 4000

RemoteState = str
"""A task's A2A state in lower case without its prefix: `submitted`, `working`,
`input_required`, `auth_required`, `completed`, `failed`, `canceled`, `rejected`."""
TERMINAL: frozenset[RemoteState] = frozenset({"completed", "failed", "canceled", "rejected"})
INTERRUPTED: frozenset[RemoteState] = frozenset({"input_required", "auth_required"})


@dataclass(frozen=True, slots=True)
class RemoteUpdate:
    """One update of a remote agent's task, as it came: the task itself (`task`), a status
    update (`status`), a piece of an artifact (`artifact`) or a direct answer (`message`);
    the task's `state` after it, the text it carries (the status message's, the artifact
    piece's, the message's) and what the remote reported its task used so far (through our
    extension; None when it said nothing)."""

    kind: Literal["task", "status", "artifact", "message"]
    task_id: str | None
    state: RemoteState | None
    text: str
    usage: FamilyUsage | None = None

    def describe(self) -> str:
        """One line for a progress report: `working: Looking it up`, `artifact: …`."""
        label = "artifact" if self.kind == "artifact" else self.state or self.kind
        text = self.text.strip()
        if len(text) > MAX_UPDATE_CHARS:
            text = text[:MAX_UPDATE_CHARS] + "…"
        return f"{label}: {text}" if text else label


@dataclass(frozen=True, slots=True)
class RemoteAnswer:
    """A remote task that completed: its answer (its artifacts' text, else its last status
    message's, else its direct message's) and what it reported it used (None: nothing)."""

    task_id: str | None
    text: str
    usage: FamilyUsage | None


UpdateSink = Callable[[RemoteUpdate], None]


class A2AConnector:
    """Reaches remote A2A agents: each request's destination checked by the SSRF guard with
    the caller's `NetworkPolicy`, `timeout_s` for connecting and for the card, `call_timeout_s`
    for a remote task's answer (a stream may be silent that long). The TLS context is loaded
    once, off the event loop."""

    def __init__(
        self,
        *,
        timeout_s: float,
        call_timeout_s: float,
        resolver: Resolver = system_resolver,
    ) -> None:
        self._timeout_s = timeout_s
        self._call_timeout_s = call_timeout_s
        self._resolver = resolver
        self._ssl_context: ssl.SSLContext | None = None

    async def fetch_card(
        self, url: str, *, network: NetworkPolicy, headers: Mapping[str, str]
    ) -> AgentCard:
        """The agent card at `url` (or, for an agent's bare address, its well-known card),
        checked by `parse_card` (with an interface at `url`'s origin, where the agent will
        be called): `CardRefused` when it cannot be used, `DestinationRefused` when the guard
        refuses its address, `ToolError` when it cannot be fetched."""
        location = card_location(url)
        async with WebClient(
            SsrfGuard(network, self._resolver),
            await self._ssl(),
            tool="a remote agent's card",
            max_bytes=MAX_CARD_BYTES,
            timeout_s=self._timeout_s,
            user_agent=USER_AGENT,
        ) as web:
            fetched = await web.request(
                "GET", location, headers={"Accept": "application/json", **headers}
            )
        if fetched.status != 200:
            raise CardRefused(f"{location} answered HTTP {fetched.status}, not an agent card")
        if fetched.truncated:
            raise CardRefused(f"its agent card is larger than {MAX_CARD_BYTES} bytes")
        try:
            document = json.loads(fetched.body)
        except ValueError as exc:
            raise CardRefused(f"its agent card is not JSON: {exc}") from None
        return parse_card(document, origin=origin_of(location))

    async def call(
        self,
        card: AgentCard,
        text: str,
        *,
        agent: str,
        origin: Origin,
        network: NetworkPolicy,
        headers: Mapping[str, str],
        trail: Sequence[str] = (),
        on_update: UpdateSink | None = None,
    ) -> RemoteAnswer:
        """Sends `text` to the agent of `card` (named `agent` in messages) and follows its
        task to its end, each update handed to `on_update`. Only `origin`, the one the agent
        was registered at, is called: the card's interfaces elsewhere are ignored (none left:
        `destination_refused`), and any request to another origin is refused before it is
        sent. `trail` names the tasks the call comes from (`hop_metadata`). A task that did
        not complete raises `ToolError` with the remote's words; one that asks for input or
        credentials is cancelled (we cannot give them). Cancelling the call cancels the
        remote task."""
        card = at_origin(card, origin)
        guard = SsrfGuard(network, self._resolver)
        http = httpx.AsyncClient(
            transport=GuardedTransport(guard, await self._ssl(), origin=origin),
            headers={**headers, HTTP_EXTENSION_HEADER: EXTENSION_URI, "User-Agent": USER_AGENT},
            timeout=httpx.Timeout(self._timeout_s, read=self._call_timeout_s),
            follow_redirects=False,
            trust_env=False,
        )
        # The SDK's client (its transports, telemetry and queues: a tenth of a second of
        # imports) is imported by the first call, not by the service's start-up.
        from a2a.client import ClientConfig, ClientFactory

        try:
            config = ClientConfig(
                streaming=True, httpx_client=http, supported_protocol_bindings=list(BINDINGS)
            )
            try:
                client = ClientFactory(config).create(card)
            except ValueError as exc:
                raise ToolError(f"the remote agent {agent!r} cannot be called: {exc}") from None
            task = _Task(agent)
            try:
                await task.follow(client, text, trail, on_update)
            except asyncio.CancelledError:
                if task.id is not None and task.state not in TERMINAL:
                    await _cancel(client, task.id, agent)
                raise
            if task.state in INTERRUPTED and task.id is not None:
                await _cancel(client, task.id, agent)
            return task.answer()
        finally:
            await http.aclose()

    async def _ssl(self) -> ssl.SSLContext:
        if self._ssl_context is None:  # loading the CA bundle takes ~18 ms: once, off the loop
            self._ssl_context = await asyncio.to_thread(httpx.create_ssl_context, trust_env=False)
        return self._ssl_context


@dataclass
class _Task:
    """A remote task as its updates tell it."""

    agent: str
    id: str | None = None
    state: RemoteState | None = None
    status_text: str = ""
    message_text: str | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    usage: FamilyUsage | None = None

    async def follow(
        self, client: "Client", text: str, trail: Sequence[str], on_update: UpdateSink | None
    ) -> None:
        from a2a.client import A2AClientError, A2AClientTimeoutError

        message = Message(role=Role.ROLE_USER, message_id=str(uuid4()), parts=[Part(text=text)])
        if trail:
            message.metadata.update(hop_metadata(trail))
        request = SendMessageRequest(message=message)
        responses = cast(AsyncGenerator[StreamResponse, None], client.send_message(request))
        try:
            async with contextlib.aclosing(responses):
                async for response in responses:
                    update = self._read(response)
                    if on_update is not None:
                        on_update(update)
                    if self.state in TERMINAL or self.state in INTERRUPTED:
                        break
        except A2AClientTimeoutError:
            raise ToolTimeoutError(
                f"the remote agent {self.agent!r} did not answer in time"
            ) from None
        except A2AClientError as exc:
            raise ToolError(
                f"the remote agent {self.agent!r} is unavailable: {exc.message}",
                error_code=ErrorCode.TOOL_UNAVAILABLE,
            ) from None
        except A2AError as exc:
            raise ToolError(
                f"the remote agent {self.agent!r} refused the message: {exc.message}",
                error_code=_loop_code(exc.data),
            ) from None

    def answer(self) -> RemoteAnswer:
        """The completed task's answer; `ToolError` for any other end."""
        said = self.status_text.strip() or self.message_text or "it said nothing more"
        if self.state == "completed":
            parts = [text for text in self.artifacts.values() if text]
            answer = "\n".join(parts) or self.status_text or self.message_text or ""
            return RemoteAnswer(self.id, answer, self.usage)
        if self.state in INTERRUPTED:
            raise ToolError(
                f"the remote agent {self.agent!r} asks for "
                f"{'credentials' if self.state == 'auth_required' else 'input'} that this call "
                f"cannot give ({self.state}: {said}); its task was cancelled"
            )
        if self.state in TERMINAL:
            raise ToolError(f"the remote agent {self.agent!r} ended its task {self.state}: {said}")
        raise ToolError(
            f"the remote agent {self.agent!r} ended its stream while its task was still "
            f"{self.state or 'not started'}",
            error_code=ErrorCode.TOOL_UNAVAILABLE,
        )

    def _read(self, response: StreamResponse) -> RemoteUpdate:
        """Takes in one streamed response; the update it is."""
        if response.HasField("task"):
            task = response.task
            self.id, self.state = task.id, _state(task.status.state)
            if task.status.HasField("message"):
                self.status_text = get_message_text(task.status.message)
            self.artifacts = {a.artifact_id: get_artifact_text(a) for a in task.artifacts}
            self._took(task.metadata)
            return RemoteUpdate("task", self.id, self.state, self.status_text, self.usage)
        if response.HasField("status_update"):
            status = response.status_update
            self.id, self.state = status.task_id or self.id, _state(status.status.state)
            text = ""
            if status.status.HasField("message"):
                text = self.status_text = get_message_text(status.status.message)
            self._took(status.metadata)
            return RemoteUpdate("status", self.id, self.state, text, self.usage)
        if response.HasField("artifact_update"):
            piece = response.artifact_update
            self.id = piece.task_id or self.id
            artifact = piece.artifact
            text = get_artifact_text(artifact)
            before = self.artifacts.get(artifact.artifact_id, "") if piece.append else ""
            self.artifacts[artifact.artifact_id] = before + text
            self._took(piece.metadata)
            return RemoteUpdate("artifact", self.id, self.state, text, self.usage)
        message = response.message
        self.message_text = get_message_text(message)
        self.id = message.task_id or self.id
        # A direct answer: no task was made (or it is this task's last word).
        self.state = "completed" if self.state is None else self.state
        self._took(message.metadata)
        return RemoteUpdate("message", self.id, self.state, self.message_text, self.usage)

    def _took(self, metadata: Struct) -> None:
        """What the remote reports used so far (its latest report is its total)."""
        usage = FamilyUsage.of(MessageToDict(metadata)) if metadata.fields else None
        if usage is not None:
            self.usage = usage


# What a server speaking our extension says of a message that loops back into it.
_LOOP_CODES = {code.value: code for code in (ErrorCode.AGENT_CYCLE, ErrorCode.AGENT_DEPTH_EXCEEDED)}


def _loop_code(data: object) -> ErrorCode | None:
    """`agent_cycle` or `agent_depth_exceeded` where a refusal's data names it; None for
    anything else (a remote's word is taken for these two alone)."""
    code = data.get("error_code") if isinstance(data, dict) else None
    return _LOOP_CODES.get(code) if isinstance(code, str) else None


def _state(state: int) -> RemoteState:
    try:
        name = str(TaskState.Name(state))
    except ValueError:
        return "unknown"
    return name.removeprefix("TASK_STATE_").lower()


async def _cancel(client: "Client", task_id: str, agent: str) -> None:
    """Asks the agent to cancel its task, waiting at most `CANCEL_TIMEOUT_S`; a failure is
    logged (our call's own end stands), and a cancel of our call meanwhile does not stop it."""
    attempt = asyncio.ensure_future(client.cancel_task(CancelTaskRequest(id=task_id)))
    done, _ = await asyncio.wait({attempt}, timeout=CANCEL_TIMEOUT_S)
    if not done:
        attempt.cancel()
        logger.warning(
            "remote agent %r did not answer CancelTask within %gs", agent, CANCEL_TIMEOUT_S
        )
        return
    if (error := attempt.exception()) is not None:
        logger.warning("remote agent %r refused CancelTask for %s: %s", agent, task_id, error)
