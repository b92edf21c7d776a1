"""What the request input check adds per request: the strict JSON parse of a body (against the
plain `json.loads` it replaces) and the check of path, query and header text, on the bodies and
queries the API sees."""

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from starlette.requests import Request

from app.api.inputs import check_inputs, parse_json_body

_TASK = {"input": "What is 17 * 23 + 4?", "metadata": {"ticket": "OPS-1234", "team": "billing"}}
_CHAT = {
    "messages": [
        {"role": "system", "content": "You answer with care."},
        {"role": "user", "content": "Summarise the attached report. " * 20},
        {"role": "assistant", "content": "Here is a summary. " * 30},
        {"role": "user", "content": "Shorter, please."},
    ],
    "metadata": {f"k{index}": "v" * 100 for index in range(150)},  # ~16 KiB
}
_LARGE = {"input": "word " * 40_000}  # the 200,000-character cap
BODIES = {"task (90 B)": _TASK, "chat, 16 KiB metadata": _CHAT, "input at the cap (200 kB)": _LARGE}


@dataclass(frozen=True, slots=True)
class Figure:
    label: str
    plain_us: float
    checked_us: float

    @property
    def added_us(self) -> float:
        return self.checked_us - self.plain_us


def _per_call_us(call: Callable[[], Any], repeat: int) -> float:
    """The fastest of 5 rounds, in microseconds per call (least disturbed by other work)."""
    rounds = []
    for _ in range(5):
        started = time.perf_counter_ns()
        for _ in range(repeat):
            call()
        rounds.append((time.perf_counter_ns() - started) / repeat / 1000)
    return min(rounds)


def _request() -> Request:
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/api/v1/tenants/acme/audit",
        "path_params": {"tenant_id": "acme"},
        "query_string": b"actor=alice&action=tenant.*&from=2026-11-01T00:00:00Z&limit=50",
        "headers": [(b"last-event-id", b"42"), (b"authorization", b"Bearer x")],
    }
    return Request(scope)


def run(repeat: int = 2000) -> list[Figure]:
    figures = []
    for label, value in BODIES.items():
        body = json.dumps(value).encode()
        times = max(repeat // max(len(body) // 2000, 1), 50)
        plain = _per_call_us(partial(json.loads, body), times)
        checked = _per_call_us(partial(parse_json_body, body), times)
        figures.append(Figure(f"JSON body: {label}", plain, checked))
    request = _request()
    figures.append(
        Figure(
            "path, query and Last-Event-ID",
            0.0,
            _per_call_us(lambda: check_inputs(request), repeat),
        )
    )
    return figures
