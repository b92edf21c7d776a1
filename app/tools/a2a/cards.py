"""Agent cards of remote A2A agents: read with the `a2a-sdk`'s own parser (which also reads
v0.3 cards), checked for what calling the agent needs, and kept as A2A's JSON form."""

import copy
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from a2a.types import AgentCard, AgentInterface
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, TransportProtocol
from google.protobuf.json_format import (  # type: ignore[import-untyped]
    MessageToDict,
    ParseDict,
    ParseError,
)

from app.chain import ErrorCode
from app.tools.errors import ToolError
from app.tools.net.urls import checked_http_url

BINDINGS = (TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value)
"""The protocol bindings we call agents over (gRPC is not offered)."""


class CardRefused(ToolError):
    """A card that cannot be fetched, or that is not a card of an agent we can call."""


def card_location(url: str) -> str:
    """Where the card of `url` is: `url` itself, or, for an agent's bare address (no path),
    its well-known card (`/.well-known/agent-card.json`)."""
    parts = urlsplit(url)
    if parts.path in ("", "/") and not parts.query:
        return urlunsplit(parts._replace(path=AGENT_CARD_WELL_KNOWN_PATH))
    return url


Origin = tuple[str, str, int]
"""Scheme, host (lower case) and port (the scheme's default when the URL names none)."""

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> Origin:
    """The origin of an http(s) URL; `ValueError` for any other."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"not a valid URL: {exc}") from None
    scheme = parsed.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parsed.host:
        raise ValueError("must be an http:// or https:// URL with a host")
    return scheme, parsed.host.lower().rstrip("."), parsed.port or _DEFAULT_PORTS[scheme]


def shown_origin(origin: Origin) -> str:
    scheme, host, port = origin
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}:{port}"


def _at(interface: AgentInterface, origin: Origin) -> bool:
    try:
        return origin_of(interface.url) == origin
    except ValueError:
        return False


def at_origin(card: AgentCard, origin: Origin) -> AgentCard:
    """`card` with only its interfaces at `origin`, the one its agent was registered at: a
    card names where to send requests (and the tenant's credentials with them), and a card
    naming another host or port must not move them there. `CardRefused` when none is left."""
    kept = [i for i in card.supported_interfaces if _at(i, origin)]
    if not kept:
        elsewhere = sorted({i.url[:200] for i in card.supported_interfaces})
        raise CardRefused(
            f"its agent card names interfaces only at {', '.join(elsewhere) or 'no URL'}, none "
            f"at {shown_origin(origin)}, the origin it is registered at; a remote agent is "
            "called only at the origin (scheme, host and port) of its card's URL",
            error_code=ErrorCode.DESTINATION_REFUSED,
        )
    if len(kept) == len(card.supported_interfaces):
        return card
    bound = AgentCard()
    bound.CopyFrom(card)
    del bound.supported_interfaces[:]
    bound.supported_interfaces.extend(kept)
    return bound


def parse_card(document: Any, *, origin: Origin | None = None) -> AgentCard:
    """`document` as an agent card we can call: a name, at least one skill, and an interface
    over JSON-RPC or HTTP+JSON at an http(s) URL (at `origin`, when given: the origin the
    agent is registered at). `CardRefused` says what is missing."""
    if not isinstance(document, dict):
        raise CardRefused("its agent card is not a JSON object")
    # Imported here: the SDK's client package is a tenth of a second of the start-up.
    from a2a.client.card_resolver import parse_agent_card

    try:
        card = parse_agent_card(copy.deepcopy(document))
    except (ParseError, TypeError, ValueError, AttributeError) as exc:
        raise CardRefused(f"its agent card is not a valid A2A agent card: {exc}") from None
    if not card.name.strip():
        raise CardRefused("its agent card has no name")
    if not card.skills:
        raise CardRefused("its agent card lists no skills (nothing could call it)")
    interfaces = [i for i in card.supported_interfaces if i.protocol_binding in BINDINGS]
    if not interfaces:
        offered = ", ".join(i.protocol_binding for i in card.supported_interfaces) or "none"
        raise CardRefused(
            f"its agent card offers no interface over {' or '.join(BINDINGS)} (it offers {offered})"
        )
    for interface in interfaces:
        try:
            checked_http_url(interface.url, no_credentials="an agent's URL may not hold them")
        except ValueError as exc:
            raise CardRefused(f"its interface URL {interface.url[:200]!r} {exc}") from None
    if origin is not None:
        at_origin(card, origin)
    return card


def card_document(card: AgentCard) -> dict[str, Any]:
    """The card in A2A's JSON form, as stored."""
    document: dict[str, Any] = MessageToDict(card)
    return document


def card_of(document: dict[str, Any]) -> AgentCard:
    """A stored card."""
    card: AgentCard = ParseDict(document, AgentCard(), ignore_unknown_fields=True)
    return card
