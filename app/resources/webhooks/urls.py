"""Webhook URLs: their form (http or https, a host, no credentials) checked where they are
given, and their destination checked by the SSRF guard at registration, at submission and
again at every delivery (a name may resolve elsewhere later)."""

from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints

from app.tools.errors import ToolError
from app.tools.net import Resolver, SsrfGuard, system_resolver
from app.tools.net.urls import checked_http_url
from app.tools.services import NetworkPolicy

MAX_URL_CHARS = 2048


def _checked_url(url: str) -> str:
    return checked_http_url(url, no_credentials="deliveries are signed instead")


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
