"""An A2A `SendMessage` round trip over one of our agents vs our REST API doing the same task.

The service runs in its own process on Postgres, with a fake LLM server in another answering
every call with "ok" at once; the agent `echo` has no tools, so each task is one LLM call.
Four ways to get its answer, one request after another, each timed from sending the request
to holding the finished answer:

- `rest_stream`: `POST /api/v1/tasks` with `Accept: text/event-stream` (the answer is the
  task's stream), read to `done`; the answer is in `chain_completed`. One request, as A2A.
- `rest_follow`: `POST /api/v1/tasks` (202), then `GET` its `stream_url`, read to `done`.
- `rest_conversation`: `POST /api/v1/conversations`, then the task as a turn of it, streamed
  as `rest_stream`: the service's work of an A2A SendMessage without a `context_id`, which
  opens a conversation (the task's context) for its task.
- `a2a_jsonrpc`: a plain POST of the JSON-RPC `SendMessage` body (blocking: no
  `return_immediately`) with `A2A-Version: 1.0`; the answer is the completed task.
- `a2a_sdk`: the same call through the official a2a-sdk client (JSON-RPC binding, not
  streaming), built once from the agent's card.

Every series goes through one keep-alive `httpx.AsyncClient` (the SDK's own HTTP client), so
the client side differs only where the protocols do. The series are interleaved in rounds
(order rotated); the service's CPU is read from /proc around each block.
"""

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from uuid import uuid4

import httpx
from a2a.client import Client
from a2a.types import a2a_pb2 as a2a

from app.security import mint_token
from bench.service_harness import (
    JWT_SECRET,
    TENANT,
    Stack,
    machine_cpu_s,
    percentile,
    run_async,
    stack,
)
from tests.a2a_helpers import JSONRPC, a2a_client, agent_base

DELAY_S = 0.0
AGENT = "echo"
INPUT = "Say ok."
ANSWER = "ok"
WARM_UP = 20
SERIES = ("rest_stream", "rest_follow", "rest_conversation", "a2a_jsonrpc", "a2a_sdk")


@dataclass
class Series:
    name: str
    latencies_ms: list[float] = field(default_factory=list)
    server_cpu_s: float = 0.0
    client_cpu_s: float = 0.0

    def p(self, q: float) -> float:
        return percentile(self.latencies_ms, q)

    @property
    def server_cpu_ms(self) -> float:
        return self.server_cpu_s * 1000 / len(self.latencies_ms)

    @property
    def client_cpu_ms(self) -> float:
        return self.client_cpu_s * 1000 / len(self.latencies_ms)


@dataclass(frozen=True)
class A2ARoundTrip:
    samples: int
    rounds: int
    series: dict[str, Series]
    server_problems: list[str]
    wall_s: float
    machine_cpu_s: float  # every process's, others' included

    def added(self, name: str, q: float, over: str = "rest_stream") -> float:
        return self.series[name].p(q) - self.series[over].p(q)


async def _sse_answer(response: httpx.Response) -> str:
    """Reads a task's stream to `done`; returns the answer of `chain_completed`."""
    if response.status_code != 200:
        raise RuntimeError(f"HTTP {response.status_code}: {(await response.aread())!r}")
    kind, answer = "message", None
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            kind = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data = json.loads(line.removeprefix("data:"))
            if kind == "chain_completed":
                answer = data["answer"]
            elif kind == "done":
                if data["final_state"] != "completed" or answer is None:
                    raise RuntimeError(f"the task ended {data['final_state']}")
                return str(answer)
        elif not line:
            kind = "message"
    raise RuntimeError("the stream ended without `done`")


def _calls(
    http: httpx.AsyncClient, stack: Stack, sdk: Client
) -> dict[str, Callable[[], Awaitable[str]]]:
    tasks_url = f"{stack.base_url}/api/v1/tasks"
    conversations_url = f"{stack.base_url}/api/v1/conversations"
    a2a_url = agent_base(stack.base_url, TENANT, AGENT)

    async def rest_stream(**fields: str) -> str:
        body = {"input": INPUT, "agent": AGENT, **fields}
        headers = {"Accept": "text/event-stream"}
        async with http.stream("POST", tasks_url, json=body, headers=headers) as response:
            return await _sse_answer(response)

    async def rest_conversation() -> str:
        opened = await http.post(conversations_url, json={"agent": AGENT})
        if opened.status_code != 201:
            raise RuntimeError(f"HTTP {opened.status_code}: {opened.text}")
        return await rest_stream(conversation_id=opened.json()["id"])

    async def rest_follow() -> str:
        accepted = await http.post(tasks_url, json={"input": INPUT, "agent": AGENT})
        if accepted.status_code != 202:
            raise RuntimeError(f"HTTP {accepted.status_code}: {accepted.text}")
        stream_url = stack.base_url + accepted.json()["stream_url"]
        async with http.stream("GET", stream_url) as response:
            return await _sse_answer(response)

    async def a2a_jsonrpc() -> str:
        message = {"messageId": str(uuid4()), "role": "ROLE_USER", "parts": [{"text": INPUT}]}
        body = {
            "jsonrpc": "2.0",
            "id": str(uuid4()),
            "method": "SendMessage",
            "params": {"message": message},
        }
        response = await http.post(a2a_url, json=body, headers={"A2A-Version": "1.0"})
        task = response.json()["result"]["task"]
        if task["status"]["state"] != "TASK_STATE_COMPLETED":
            raise RuntimeError(f"the task ended {task['status']}")
        return "".join(part["text"] for part in task["status"]["message"]["parts"])

    async def a2a_sdk() -> str:
        message = a2a.Message(
            message_id=str(uuid4()), role=a2a.ROLE_USER, parts=[a2a.Part(text=INPUT)]
        )
        [response] = [r async for r in sdk.send_message(a2a.SendMessageRequest(message=message))]
        task = response.task
        if task.status.state != a2a.TASK_STATE_COMPLETED:
            raise RuntimeError(f"the task ended {task.status}")
        return "".join(part.text for part in task.status.message.parts)

    return {
        "rest_stream": rest_stream,
        "rest_follow": rest_follow,
        "rest_conversation": rest_conversation,
        "a2a_jsonrpc": a2a_jsonrpc,
        "a2a_sdk": a2a_sdk,
    }


async def _time(call: Callable[[], Awaitable[str]]) -> float:
    started = time.perf_counter()
    answer = await call()
    elapsed = (time.perf_counter() - started) * 1000
    if answer != ANSWER:
        raise RuntimeError(f"answered {answer!r}, not {ANSWER!r}")
    return elapsed


async def _measure(samples: int, rounds: int) -> A2ARoundTrip:
    async with stack([DELAY_S]) as service:
        admin = mint_token(JWT_SECRET, tenant_id=TENANT, subject="bench", roles=["tenant_admin"])
        async with httpx.AsyncClient(timeout=60) as http:
            defined = await http.post(
                f"{service.base_url}/api/v1/agents",
                json={"name": AGENT, "model": service.model_for(DELAY_S), "tools": []},
                headers={"Authorization": f"Bearer {admin}"},
            )
            if defined.status_code != 201:
                raise RuntimeError(f"defining {AGENT}: {defined.status_code} {defined.text}")
        async with httpx.AsyncClient(headers=service.headers(), timeout=60) as http:
            sdk = await a2a_client(
                http, agent_base(service.base_url, TENANT, AGENT), JSONRPC, streaming=False
            )
            calls = _calls(http, service, sdk)
            for call in calls.values():
                for _ in range(WARM_UP):
                    await _time(call)
            problems_before = len(service.problems())
            series = {name: Series(name) for name in SERIES}
            per_block = max(samples // rounds, 1)
            wall, machine = time.perf_counter(), machine_cpu_s()
            for round_ in range(rounds):
                shift = round_ % len(SERIES)
                for name in (*SERIES[shift:], *SERIES[:shift]):
                    measured = series[name]
                    cpu, client_cpu = service.service.cpu_s(), time.process_time()
                    for _ in range(per_block):
                        measured.latencies_ms.append(await _time(calls[name]))
                    measured.server_cpu_s += service.service.cpu_s() - cpu
                    measured.client_cpu_s += time.process_time() - client_cpu
            wall, machine = time.perf_counter() - wall, machine_cpu_s() - machine
        return A2ARoundTrip(
            samples=per_block * rounds,
            rounds=rounds,
            series=series,
            server_problems=service.problems()[problems_before:],
            wall_s=wall,
            machine_cpu_s=machine,
        )


def run(samples: int = 200, rounds: int = 10) -> A2ARoundTrip:
    """`samples` sequential round trips per series, in `rounds` interleaved blocks."""
    return run_async(_measure(samples, rounds))
