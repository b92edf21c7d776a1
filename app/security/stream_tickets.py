"""Stream tickets: short-lived credentials that open one task's stream, for clients that cannot
send an `Authorization` header (a browser's `EventSource`). Stateless: the ticket carries the
caller's identity and is signed with a key derived from the secrets key, so every instance
verifies what any issued."""

import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Self
from uuid import UUID

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from app.config import Settings
from app.security.principal import Principal
from app.security.tokens import AuthenticationFailed

# What the derived key is for: a key derived for anything else never verifies a ticket.
_KEY_PURPOSE = b"omniforge/stream-ticket/v1"
_VERSION = 1
# Far above any real ticket (a few hundred bytes); a longer one is refused unread.
MAX_TICKET_CHARS = 2048
QUERY_PARAMETER = "ticket"
_IN_A_QUERY = re.compile(r"(?<=[?&]ticket=)[^&\s\"]+")
MASK = "***"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _derive(key: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_KEY_PURPOSE).derive(key)


class StreamTickets:
    """Issues and verifies tickets: `<payload>.<HMAC-SHA256>`, both base64url, the payload the
    task id, the caller's tenant, subject, roles and API key, and the expiry (Unix ms). The
    first key signs, each verifies (keys rotate like the secrets key they derive from)."""

    def __init__(self, keys: Sequence[bytes], *, ttl_s: float) -> None:
        if not keys:
            raise ValueError("stream tickets need at least one key")
        if ttl_s <= 0:
            raise ValueError("a stream ticket must live some time")
        self._keys = [_derive(key) for key in keys]
        self.ttl_s = ttl_s

    @classmethod
    def from_settings(cls, settings: Settings) -> Self:
        """Tickets keyed by `settings.resolved_secrets_keys()`, living `stream_ticket_ttl_s`."""
        return cls(settings.resolved_secrets_keys(), ttl_s=settings.stream_ticket_ttl_s)

    def issue(self, principal: Principal, task_id: UUID, *, now: float | None = None) -> str:
        """A ticket that opens `task_id`'s stream as `principal` until `expires_at(...)`."""
        issued = time.time() if now is None else now
        payload = {
            "v": _VERSION,
            "task": str(task_id),
            "tenant": principal.tenant_id,
            "sub": principal.subject,
            "roles": sorted(principal.roles),
            "key": principal.api_key,
            "exp": int((issued + self.ttl_s) * 1000),
        }
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        return f"{body}.{_b64(self._sign(self._keys[0], body))}"

    def verify(self, ticket: str, task_id: UUID, *, now: float | None = None) -> Principal:
        """The principal `ticket` was issued to, if it is genuine, unexpired and for `task_id`;
        otherwise `AuthenticationFailed` saying which."""
        if len(ticket) > MAX_TICKET_CHARS:
            raise AuthenticationFailed("the stream ticket is malformed")
        body, _, signature = ticket.partition(".")
        try:
            given = _unb64(signature)
        except (binascii.Error, ValueError):
            raise AuthenticationFailed("the stream ticket is malformed") from None
        if not any(hmac.compare_digest(self._sign(key, body), given) for key in self._keys):
            raise AuthenticationFailed("the stream ticket's signature is invalid")
        payload = _payload(body)
        if payload["task"] != str(task_id):
            raise AuthenticationFailed("the stream ticket is for another task")
        if (time.time() if now is None else now) * 1000 >= payload["exp"]:
            raise AuthenticationFailed("the stream ticket has expired")
        return Principal(
            subject=payload["sub"],
            tenant_id=payload["tenant"],
            roles=frozenset(payload["roles"]),
            api_key=payload["key"],
        )

    def expires_at(self, ticket: str) -> float:
        """When an issued `ticket` expires (Unix seconds)."""
        return float(_payload(ticket.partition(".")[0])["exp"]) / 1000

    @staticmethod
    def _sign(key: bytes, body: str) -> bytes:
        return hmac.new(key, body.encode("ascii", "replace"), hashlib.sha256).digest()


def _payload(body: str) -> dict[str, Any]:
    """A signed payload: ours, so its shape is checked only against another version's."""
    try:
        payload = json.loads(_unb64(body))
    except (binascii.Error, ValueError):
        raise AuthenticationFailed("the stream ticket is malformed") from None
    if not isinstance(payload, dict) or payload.get("v") != _VERSION:
        raise AuthenticationFailed("the stream ticket is of another version")
    return payload


def mask_tickets(text: str) -> str:
    """`text` with the value of every `ticket=` query parameter masked."""
    return _IN_A_QUERY.sub(MASK, text) if "ticket=" in text else text


class TicketMaskingFilter(logging.Filter):
    """Masks stream tickets in the request line of access log records (uvicorn's arguments:
    client, method, path with query, HTTP version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                mask_tickets(arg) if isinstance(arg, str) else arg for arg in record.args
            )
        if isinstance(record.msg, str):
            record.msg = mask_tickets(record.msg)
        return True


def install_ticket_masking(loggers: Iterable[str] = ("uvicorn.access",)) -> Callable[[], None]:
    """Adds a `TicketMaskingFilter` to `loggers` (a logger's own filters run for every record
    logged on it, whatever its handlers); returns what removes it again."""
    masking = TicketMaskingFilter()
    targets = [logging.getLogger(name) for name in loggers]
    for logger in targets:
        logger.addFilter(masking)

    def uninstall() -> None:
        for logger in targets:
            logger.removeFilter(masking)

    return uninstall
