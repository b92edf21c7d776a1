"""Reading Server-Sent Events off a real HTTP response, as a browser's EventSource would."""

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True, slots=True)
class SSE:
    id: int | None
    event: str
    data: str
    comment: bool = False

    @property
    def json(self) -> Any:
        return json.loads(self.data)


async def read_sse(response: httpx.Response, *, comments: bool = False) -> AsyncIterator[SSE]:
    """Yields each event as it arrives (comments too when asked)."""
    event_id: int | None = None
    event = "message"
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield SSE(event_id, event, "\n".join(data))
            event_id, event, data = None, "message", []
        elif line.startswith(":"):
            if comments:
                yield SSE(None, "", line[1:].strip(), comment=True)
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                event_id = int(value)
            elif field == "event":
                event = value
            elif field == "data":
                data.append(value)


async def collect(response: httpx.Response, *, stop_after: int | None = None) -> list[SSE]:
    """Every event until the stream ends (or `stop_after` events)."""
    events: list[SSE] = []
    async for item in read_sse(response):
        events.append(item)
        if stop_after is not None and len(events) >= stop_after:
            break
    return events
