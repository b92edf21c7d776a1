"""A counting fake LLM for chaos scenarios: an OpenAI-compatible chat-completions server that
answers every chaos task's two calls by itself and counts every request it receives.

A chaos task's input carries its marker (`task_input(17)` = "[chaos 17] What is 12*(3+4)?").
The server finds the marker in a request's first user message and the call's iteration in the
number of assistant turns the request already carries: iteration 0 is answered with a
`calculator` tool call, iteration 1 with the final text. Replies depend on (marker, iteration)
alone, so a call made again is answered the same. Each reply comes its delay after its request
arrived (`delay_s`: seconds, or a function of marker and iteration), and not before the gate
is open (`hold()` closes it, `release()` opens it).

Every request is kept as an `LLMCall`, with the instance that made it: each instance's model
list key is `chaos-<instance name>` (`instance_key()`), which the server reads back from the
request's `Authorization` header. A call is `open` until its reply was sent (`answered`), its
client went away first (`abandoned`: a killed instance's calls), or it was refused (`refused`:
no marker, or an iteration past the last; also listed in `unexpected`). A streamed reply whose
client went away halfway counts as answered: what was sent cannot be told from what arrived."""

import asyncio
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from aiohttp import web

from tests.chaos.waiting import Changes
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import INPUT_PRICE, OUTPUT_PRICE

MARKER = re.compile(r"\[chaos (\d+)\]")
EXPRESSION = "12*(3+4)"
ANSWER = "12*(3+4) = 84."
# Usage reported per iteration (prompt, completion tokens): what each answered call costs.
USAGE = ((120, 18), (160, 12))
CALLS_PER_TASK = len(USAGE)
_KEY_PREFIX = "chaos-"

CallState = Literal["open", "answered", "abandoned", "refused"]
# A reply's delay in seconds: the same for every call, or by (marker, iteration).
Delay = float | Callable[[int, int], float]


def task_input(marker: int) -> str:
    """The input of the chaos task `marker`."""
    return f"[chaos {marker}] What is {EXPRESSION}?"


def instance_key(instance: str) -> str:
    """The API key an instance's model list sends: how the server tells instances apart."""
    return f"{_KEY_PREFIX}{instance}"


def price(prompt_tokens: int, completion_tokens: int) -> Decimal:
    """What the model list's prices make of a reply's usage."""
    return Decimal(INPUT_PRICE) * prompt_tokens + Decimal(OUTPUT_PRICE) * completion_tokens


@dataclass
class LLMCall:
    """One chat-completions request as received. `marker` is None for a request that names no
    chaos task; `instance` is None when its key is not an instance's."""

    marker: int | None
    iteration: int
    instance: str | None
    received_at: float  # time.monotonic()
    state: CallState = "open"

    @property
    def cost(self) -> Decimal:
        """What the reply's usage is worth; nothing unless it was answered."""
        if self.state != "answered":
            return Decimal(0)
        return price(*USAGE[self.iteration])


def reply_for(marker: int, iteration: int, delay_s: float, gate: asyncio.Event) -> Reply:
    """The answer to call `iteration` of task `marker`: the same every time it is asked."""
    prompt, completion = USAGE[iteration]
    if iteration == 0:
        call = ToolCall("calculator", {"expression": EXPRESSION}, id=f"call-chaos-{marker}")
        return Reply.tool_calls(
            [call], prompt_tokens=prompt, completion_tokens=completion, delay_s=delay_s, gate=gate
        )
    return Reply.text(
        ANSWER, prompt_tokens=prompt, completion_tokens=completion, delay_s=delay_s, gate=gate
    )


class ChaosLLM(FakeLLMServer):
    """The counting server; `changes` is notified whenever a call arrives or changes state."""

    def __init__(self, changes: Changes, *, delay_s: Delay = 1.0) -> None:
        super().__init__(record_requests=False)
        self.delay_s = delay_s
        self.calls: list[LLMCall] = []
        self._changes = changes
        self._gate = asyncio.Event()
        self._gate.set()

    def hold(self) -> None:
        """Replies whose delay is over wait from now on, until `release()`."""
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    def calls_for(self, marker: int) -> list[LLMCall]:
        return [call for call in self.calls if call.marker == marker]

    def open_calls(self, instance: str | None = None) -> list[LLMCall]:
        """Calls still waiting for their reply (made by `instance`, if given)."""
        return [
            call
            for call in self.calls
            if call.state == "open" and (instance is None or call.instance == instance)
        ]

    def answered(self, marker: int) -> int:
        return sum(1 for call in self.calls_for(marker) if call.state == "answered")

    def repeated(self) -> dict[int, int]:
        """Per marker: requests beyond the first for the same call (same iteration)."""
        requests = Counter((c.marker, c.iteration) for c in self.calls if c.marker is not None)
        again: Counter[int] = Counter()
        for (marker, _), count in requests.items():
            again[marker] += count - 1
        return {marker: count for marker, count in again.items() if count}

    def _reply_for(self, model: str, body: dict[str, Any]) -> Reply | None:
        marker, iteration = _call_of(body)
        if marker is None or iteration >= CALLS_PER_TASK:
            return None  # the base server records it as unexpected and answers 500
        delay = self.delay_s(marker, iteration) if callable(self.delay_s) else self.delay_s
        return reply_for(marker, iteration, delay, self._gate)

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        body = await _body(request)
        marker, iteration = _call_of(body)
        call = LLMCall(marker, iteration, _instance(request), time.monotonic())
        self.calls.append(call)
        self._changes.notify()
        try:
            response = await super()._chat_completions(request)
        except asyncio.CancelledError:
            # Its client went away first (handlers are cancelled on a disconnect).
            call.state = "abandoned"
            self._changes.notify()
            raise
        call.state = "answered" if response.status == 200 else "refused"
        self._changes.notify()
        return response


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()  # read once: the base handler gets the cached body
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _instance(request: web.Request) -> str | None:
    key = request.headers.get("Authorization", "").removeprefix("Bearer ")
    return key.removeprefix(_KEY_PREFIX) if key.startswith(_KEY_PREFIX) else None


def _call_of(body: dict[str, Any]) -> tuple[int | None, int]:
    """The request's chaos marker (None if it has none) and iteration."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    iteration = sum(1 for m in messages if m.get("role") == "assistant")
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    found = MARKER.search(_text(first_user.get("content"))) if first_user else None
    return (int(found.group(1)) if found else None), iteration


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(_parts(content))
    return ""


def _parts(content: list[Any]) -> Iterator[str]:
    for part in content:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            yield part["text"]
