"""Webhook URLs: their form (http or https, a host, no credentials) checked where they are
given, and their destination checked by the SSRF guard at registration, at submission and
again at every delivery (a name may resolve elsewhere later)."""

from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, StringConstraints

from app.tools.errors import ToolError
from app.tools.net import Resolver, SsrfGuard, system_resolver
from app.tools.services import NetworkPolicy

MAX_URL_CHARS = 2048


def _checked_url(url: str) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not hold credentials: deliveries are signed instead")
    if port == 0:
        raise ValueError("port 0 is not a port a server listens on")
    return url


WebhookUrl = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_URL_CHARS),
    AfterValidator(_checked_url),
    Field(description="Where deliveries are POSTed: an http:// or https:// URL."),
]


async def refusal(
    url: str, network: NetworkPolicy, resolver: Resolver = system_resolver
) -> str | None:
    """Why the SSRF guard refuses `url` under `network`, or None when it may be reached."""
    try:
        await SsrfGuard(network, resolver).check(url)
    except ToolError as exc:
        return exc.message
    return None
