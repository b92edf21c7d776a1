"""The A2A SDK's server side: its two bindings' dispatchers over `TaskHandler`, and its card
rendering. Imported by the first A2A request, not at start-up: the SDK's request handlers
import its task stores, event queues and v0.3 compatibility types (about 7 % of the
service's start-up) that a service nobody calls over A2A never needs; the first A2A request
pays that once."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.routes.rest_dispatcher import RestDispatcher
from fastapi import Request

from app.api.a2a.calls import CALL_KEY
from app.api.a2a.handler import TaskHandler


class _CallContexts(DefaultServerCallContextBuilder):
    """The SDK's call context, with the `A2ACall` the route made."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[CALL_KEY] = request.scope[CALL_KEY]
        return context


@dataclass(frozen=True, slots=True)
class Bindings:
    """What the routes use of the SDK: a dispatcher per binding, and the card's rendering."""

    jsonrpc: JsonRpcDispatcher
    rest: RestDispatcher
    card_dict: Callable[[Any], dict[str, Any]]


_handler = TaskHandler()
SDK = Bindings(
    JsonRpcDispatcher(_handler, _CallContexts()),
    RestDispatcher(_handler, _CallContexts()),
    agent_card_to_dict,
)
