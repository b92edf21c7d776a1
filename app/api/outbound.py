"""What a tenant's outbound integrations (MCP servers, remote A2A agents) are configured with:
their address, and the headers sent with every request, as text or as a tenant secret."""

import re
from collections.abc import Callable, Iterable
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints

from app.api.secrets.schemas import SECRET_NAME_PATTERN
from app.tools.header_values import PROBLEM, sendable, sendable_prefix
from app.tools.net.urls import checked_http_url

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,30}$"
"""An integration's name: its tools are `<name>__<tool>`, so it fits a model's tool name."""
MAX_HEADERS = 32
# Headers that would change how any request travels; each client adds its own.
_TRANSPORT_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "accept",
        "connection",
        "transfer-encoding",
        "upgrade",
        "te",
        "trailer",
        "keep-alive",
        "proxy-authorization",
    }
)
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")


def checked_url(url: str) -> str:
    return checked_http_url(url, no_credentials="send them in `headers`, as secrets")


def _sendable_value(value: str) -> str:
    if not sendable(value):
        raise ValueError(PROBLEM)
    return value


def _sendable_prefix(prefix: str) -> str:
    if not sendable_prefix(prefix):
        raise ValueError(PROBLEM + "; it may end in one space")
    return prefix


class SecretRef(BaseModel):
    """A tenant secret, by name: its value is sent (after `prefix`, e.g. `"Bearer "`),
    resolved when it is needed."""

    model_config = ConfigDict(extra="forbid")

    secret: Annotated[str, StringConstraints(pattern=SECRET_NAME_PATTERN)]
    prefix: Annotated[str, StringConstraints(max_length=64), AfterValidator(_sendable_prefix)] = ""


HeaderValue = Annotated[str, StringConstraints(max_length=8192), AfterValidator(_sendable_value)]


def headers_checker(
    own: Iterable[str], *, set_by: str
) -> Callable[[dict[str, HeaderValue | SecretRef]], dict[str, Any]]:
    """The check of an integration's `headers`: HTTP header names, each once, none of
    those its client (`set_by`) sets itself (`own`, besides the transport's)."""
    reserved = _TRANSPORT_HEADERS | frozenset(own)

    def checked(headers: dict[str, HeaderValue | SecretRef]) -> dict[str, Any]:
        seen: set[str] = set()
        for name in headers:
            lowered = name.lower()
            if not _HEADER_NAME.match(name):
                raise ValueError(f"{name!r} is not an HTTP header name")
            if lowered in reserved:
                raise ValueError(f"{name!r} is set by {set_by} itself")
            if lowered in seen:
                raise ValueError(f"{name!r} is given twice (header names ignore case)")
            seen.add(lowered)
        return headers

    return checked


def header_document(headers: dict[str, str | SecretRef]) -> dict[str, Any]:
    """Headers as stored (and audited): text as it is, secrets by reference."""
    return {
        name: value.model_dump(exclude_defaults=True) if isinstance(value, SecretRef) else value
        for name, value in headers.items()
    }
