"""Talking to the service's A2A agents through the official `a2a-sdk` client, as any A2A
client would: the card from its well-known URL, then either binding."""

from decimal import Decimal
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as a2a
from a2a.utils.constants import TransportProtocol
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

from app.tools.a2a.extension import FamilyUsage

JSONRPC = TransportProtocol.JSONRPC
HTTP_JSON = TransportProtocol.HTTP_JSON
BINDINGS = [JSONRPC, HTTP_JSON]


def agent_base(base_url: str, tenant: str, agent: str) -> str:
    return f"{base_url}/a2a/v1/tenants/{tenant}/agents/{agent}"


def bearer(token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)


async def fetch_card(http: httpx.AsyncClient, base: str) -> a2a.AgentCard:
    return await A2ACardResolver(http, base).get_agent_card()


async def a2a_client(
    http: httpx.AsyncClient, base: str, binding: str, *, streaming: bool = True
) -> Client:
    """A client of the agent at `base` over `binding`, with `http`'s credentials."""
    card = await fetch_card(http, base)
    config = ClientConfig(
        streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding]
    )
    return ClientFactory(config).create(card)


def text_message(text: str, *, context_id: str = "", task_id: str = "") -> a2a.Message:
    return a2a.Message(
        message_id=f"m-{abs(hash(text))}",
        role=a2a.ROLE_USER,
        parts=[a2a.Part(text=text)],
        context_id=context_id,
        task_id=task_id,
    )


def usage(item: Any) -> FamilyUsage:
    """The usage-and-cost extension an A2A object carries (it must carry one)."""
    found = FamilyUsage.of(MessageToDict(item.metadata))
    assert found is not None, item
    return found


def stored_usage(task: dict[str, Any]) -> dict[str, Any]:
    """What the extension must say of a task our REST API answers with."""
    metrics = task["usage"]
    return {
        "input_tokens": metrics["input_tokens"],
        "output_tokens": metrics["output_tokens"],
        "total_tokens": metrics["total_tokens"],
        "llm_calls": metrics["llm_calls"],
        "cost_usd": Decimal(str(metrics["total_cost_usd"])),
        "unpriced_calls": metrics["unpriced_calls"],
    }


def usage_fields(found: FamilyUsage) -> dict[str, Any]:
    return found.model_dump(exclude={"event_id"})


def event_of(response: a2a.StreamResponse) -> Any:
    """The one object a stream response holds."""
    kind = response.WhichOneof("payload")
    assert kind is not None, response
    return getattr(response, kind)
