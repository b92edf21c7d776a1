"""Reaching the web from a tool, safely: the SSRF guard (which addresses a URL may reach), a
transport that dials only the addresses the guard checked, a client that re-checks every
redirect and caps what it reads, and the reading of what comes back."""

from app.tools.net.addresses import IPAddress, parse_ip_literal, refusal_reason
from app.tools.net.client import Fetched, WebClient
from app.tools.net.guard import (
    Destination,
    DestinationRefused,
    Resolver,
    SsrfGuard,
    parse_url,
    system_resolver,
)
from app.tools.net.readable import Readable, decode_text, readable
from app.tools.net.transport import PinnedBackend, PinnedTransport

# The settings' defaults (`fetch_max_bytes`, `fetch_timeout_s`, `fetch_user_agent`), for tools
# built without settings.
DEFAULT_MAX_BYTES = 5 * 1024 * 1024
DEFAULT_TIMEOUT_S = 20.0
DEFAULT_USER_AGENT = "OmniForge/0.1 (+https://github.com/omniforge; web_fetch)"

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_USER_AGENT",
    "Destination",
    "DestinationRefused",
    "Fetched",
    "IPAddress",
    "PinnedBackend",
    "PinnedTransport",
    "Readable",
    "Resolver",
    "SsrfGuard",
    "WebClient",
    "decode_text",
    "parse_ip_literal",
    "parse_url",
    "readable",
    "refusal_reason",
    "system_resolver",
]
