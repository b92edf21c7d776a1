"""A real remote A2A agent for tests: the `a2a-sdk`'s own server (its default request handler,
an in-memory task store, its JSON-RPC and HTTP+JSON routes and its agent card route) around a
scripted `AgentExecutor`, served by uvicorn on 127.0.0.1 (a free port).

Its executor, for a message that starts with `wait`, holds its task `working` until it is
cancelled (`waiting` is set once it holds it; `cancelled` once the SDK called its `cancel`);
for `ask` it asks for input (`input_required`), for `fail` it fails its task with a reason,
for `quiet` it completes with its answer in its status message and reports no usage.
Any other message gets the three `STEPS` as `working` status updates, then the `ANSWER` as an
artifact, then `completed`: each status update and the artifact update carry what it used so
far under OmniForge's usage extension, the last `FINAL_USAGE`.

Its card lists the skills `research` and `wait`, and its interfaces in `bindings` order
(JSON-RPC first by default), each at its own address unless `elsewhere` names another base URL
for the binding (a card that sends its callers to another origin); `streaming=False` says it
does not stream. A `token` makes every
A2A request (not the card) need `Authorization: Bearer <token>` (else 401). It records the
Authorization header of each A2A request and the texts of the messages it received. It also
serves JSON that is no usable card at `NOT_A_CARD_PATH`.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Self

import uvicorn
from a2a.helpers import get_message_text, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Artifact,
    Part,
    TaskArtifactUpdateEvent,
    TaskState,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from app.tools.a2a.extension import EXTENSION_URI, FamilyUsage

TOKEN = "a2a-" + "t0ken" * 5
STEPS = ("Reading the question", "Looking things up", "Writing the answer")
ANSWER = "The answer is 42."
USAGE_SO_FAR = (
    FamilyUsage(
        input_tokens=100,
        output_tokens=10,
        total_tokens=110,
        llm_calls=1,
        cost_usd=Decimal("0.00125"),
    ),
    FamilyUsage(
        input_tokens=250,
        output_tokens=40,
        total_tokens=290,
        llm_calls=2,
        cost_usd=Decimal("0.0031"),
    ),
    FamilyUsage(
        input_tokens=400,
        output_tokens=75,
        total_tokens=475,
        llm_calls=3,
        cost_usd=Decimal("0.005375"),
    ),
)
FINAL_USAGE = FamilyUsage(
    input_tokens=512, output_tokens=96, total_tokens=608, llm_calls=4, cost_usd=Decimal("0.0071234")
)
JSONRPC_PATH = "/a2a/jsonrpc"
REST_PATH = "/a2a/rest"
# JSON that is no card of an agent one could call: it lists no skills.
NOT_A_CARD_PATH = "/not-a-card.json"


@dataclass(frozen=True)
class Received:
    path: str
    authorization: str | None


class _Executor(AgentExecutor):
    def __init__(self, agent: FakeA2AAgent) -> None:
        self._agent = agent

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        text = get_message_text(context.message)
        self._agent.messages.append(text)
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if text.startswith("wait"):
            await updater.start_work(updater.new_agent_message([Part(text="Waiting")]))
            self._agent.waiting.set()
            await asyncio.Event().wait()  # until the SDK cancels it
            return
        if text.startswith("ask"):
            question = updater.new_agent_message([Part(text="Which city do you mean?")])
            await updater.requires_input(question)
            return
        if text.startswith("fail"):
            await updater.failed(updater.new_agent_message([Part(text="The archive is closed.")]))
            return
        if text.startswith("quiet"):  # answers in its status message, reports no usage
            await updater.complete(updater.new_agent_message([Part(text="Quietly: 42.")]))
            return
        for step, usage in zip(STEPS, USAGE_SO_FAR, strict=True):
            await updater.update_status(
                TaskState.TASK_STATE_WORKING,
                message=updater.new_agent_message([Part(text=step)]),
                metadata=usage.metadata(),
            )
        await event_queue.enqueue_event(
            TaskArtifactUpdateEvent(
                task_id=task.id,
                context_id=task.context_id,
                artifact=Artifact(artifact_id="answer", name="answer", parts=[Part(text=ANSWER)]),
                metadata=FINAL_USAGE.metadata(),
            )
        )
        await updater.update_status(TaskState.TASK_STATE_COMPLETED, metadata=FINAL_USAGE.metadata())

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None
        assert context.context_id is not None
        self._agent.cancelled_tasks.append(context.task_id)
        self._agent.cancelled.set()
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


@dataclass
class FakeA2AAgent:
    token: str | None = None
    bindings: tuple[str, ...] = ("JSONRPC", "HTTP+JSON")
    streaming: bool = True
    elsewhere: dict[str, str] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    cancelled_tasks: list[str] = field(default_factory=list)
    waiting: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    _port: int = 0
    _uvicorn: _Server | None = None
    _serving: asyncio.Task[None] | None = None
    _socket: socket.socket | None = None
    _handler: DefaultRequestHandler | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def card_url(self) -> str:
        return f"{self.base_url}/.well-known/agent-card.json"

    def card(self) -> AgentCard:
        paths = {"JSONRPC": JSONRPC_PATH, "HTTP+JSON": REST_PATH}
        return AgentCard(
            name="Fake researcher",
            description="Answers questions after some research.",
            version="1.0.0",
            supported_interfaces=[
                AgentInterface(
                    url=self.elsewhere.get(binding, self.base_url) + paths[binding],
                    protocol_binding=binding,
                    protocol_version="1.0",
                )
                for binding in self.bindings
            ],
            capabilities=AgentCapabilities(
                streaming=self.streaming,
                extensions=[AgentExtension(uri=EXTENSION_URI, description="usage and cost")],
            ),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[
                AgentSkill(
                    id="research",
                    name="Research",
                    description="Researches a question and answers it.",
                    tags=["research"],
                ),
                AgentSkill(
                    id="wait",
                    name="Wait",
                    description="Waits until it is cancelled.",
                    tags=["test"],
                ),
            ],
        )

    async def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._port))
        sock.listen(128)
        self._port = sock.getsockname()[1]
        self._socket = sock
        card = self.card()
        handler = DefaultRequestHandler(
            agent_executor=_Executor(self), task_store=InMemoryTaskStore(), agent_card=card
        )
        self._handler = handler
        app = Starlette(
            routes=[
                *create_agent_card_routes(card),
                *create_jsonrpc_routes(handler, rpc_url=JSONRPC_PATH),
                *create_rest_routes(handler, path_prefix=REST_PATH),
                Route(NOT_A_CARD_PATH, _not_a_card),
            ]
        )
        config = uvicorn.Config(
            _Recording(app, self), log_level="warning", lifespan="off", timeout_graceful_shutdown=1
        )
        self._uvicorn = _Server(config)
        self._serving = asyncio.create_task(self._uvicorn.serve(sockets=[sock]))
        ready = asyncio.create_task(self._uvicorn.ready.wait())
        await asyncio.wait([self._serving, ready], return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            ready.cancel()
            raise RuntimeError("the fake A2A agent did not start")

    async def stop(self) -> None:
        if self._uvicorn is None or self._serving is None:
            return
        self._uvicorn.should_exit = True
        await self._serving
        if self._socket is not None:
            self._socket.close()
        if self._handler is not None:
            # Its tasks still under way (one whose caller went away without cancelling it)
            # end here, not as pending tasks collected in a later test.
            await self._handler.aclose()
        self._uvicorn = self._serving = self._socket = self._handler = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


@dataclass
class _Recording:
    """Records each A2A request's Authorization header; with a token, answers 401 to one
    without it (the card stays public)."""

    app: Any
    agent: FakeA2AAgent

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/a2a/"):
            headers = dict(scope["headers"])
            authorization = headers.get(b"authorization")
            shown = None if authorization is None else authorization.decode()
            self.agent.received.append(Received(scope["path"], shown))
            token = self.agent.token
            if token is not None and shown != f"Bearer {token}":
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain")],
                    }
                )
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await self.app(scope, receive, send)


async def _not_a_card(request: Request) -> JSONResponse:
    return JSONResponse({"name": "Skill-less", "description": "Does nothing.", "skills": []})


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()
