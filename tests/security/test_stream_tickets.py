"""Stream tickets as values: signed under the secrets key ring, verified by any of its keys,
and never written to the access log."""

import base64
import hashlib
import hmac
import io
import logging
import os
import time
from uuid import uuid4

import pytest
from uvicorn.logging import AccessFormatter

from app.security import AuthenticationFailed, Principal
from app.security.stream_tickets import StreamTickets, install_ticket_masking, mask_tickets

ALICE = Principal(subject="alice", tenant_id="acme", roles=frozenset({"member"}), api_key="k1")


def test_a_ticket_carries_its_callers_identity() -> None:
    tickets = StreamTickets([os.urandom(32)], ttl_s=60)
    task_id = uuid4()

    assert tickets.verify(tickets.issue(ALICE, task_id), task_id) == ALICE


def test_a_ticket_verifies_while_its_key_is_in_the_ring_and_no_longer() -> None:
    old, new = os.urandom(32), os.urandom(32)
    task_id = uuid4()
    ticket = StreamTickets([old], ttl_s=60).issue(ALICE, task_id)

    assert StreamTickets([new, old], ttl_s=60).verify(ticket, task_id) == ALICE
    with pytest.raises(AuthenticationFailed, match="signature is invalid"):
        StreamTickets([new], ttl_s=60).verify(ticket, task_id)


def test_a_ticket_expires_after_its_lifetime() -> None:
    tickets = StreamTickets([os.urandom(32)], ttl_s=60)
    task_id = uuid4()
    now = time.time()
    ticket = tickets.issue(ALICE, task_id, now=now)

    assert tickets.expires_at(ticket) == pytest.approx(now + 60, abs=0.001)
    assert tickets.verify(ticket, task_id, now=now + 59.9) == ALICE
    with pytest.raises(AuthenticationFailed, match="has expired"):
        tickets.verify(ticket, task_id, now=now + 60)


def test_the_ticket_key_is_derived_not_the_secrets_key_itself() -> None:
    """A MAC made with the raw secrets key (what another use of it might produce) is refused."""
    key = os.urandom(32)
    tickets = StreamTickets([key], ttl_s=60)
    task_id = uuid4()
    body = tickets.issue(ALICE, task_id).partition(".")[0]
    raw = hmac.new(key, body.encode(), hashlib.sha256).digest()
    forged = f"{body}.{base64.urlsafe_b64encode(raw).rstrip(b'=').decode()}"

    with pytest.raises(AuthenticationFailed, match="signature is invalid"):
        tickets.verify(forged, task_id)


def test_the_access_log_shows_no_ticket() -> None:
    written = io.StringIO()
    handler = logging.StreamHandler(written)
    handler.setFormatter(AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s'))
    access = logging.getLogger("uvicorn.access")
    access.addHandler(handler)
    level = access.level
    access.setLevel(logging.INFO)
    uninstall = install_ticket_masking()
    try:
        # As uvicorn logs a request: client, method, path with query, HTTP version, status.
        access.info(
            '%s - "%s %s HTTP/%s" %d',
            "127.0.0.1:5123",
            "GET",
            "/api/v1/tasks/t1/events?after=3&ticket=eyJ2IjoxfQ.c2lnbmF0dXJl",
            "1.1",
            200,
        )
    finally:
        uninstall()
        access.setLevel(level)
        access.removeHandler(handler)

    line = written.getvalue()
    assert "c2lnbmF0dXJl" not in line
    assert "eyJ2IjoxfQ" not in line
    assert "/api/v1/tasks/t1/events?after=3&ticket=*** HTTP/1.1" in line


def test_only_ticket_parameters_are_masked() -> None:
    assert mask_tickets("/x?ticket=a.b&after=2") == "/x?ticket=***&after=2"
    assert mask_tickets("/x?after=2&ticket=a.b") == "/x?after=2&ticket=***"
    assert mask_tickets("/x?not_a_ticket=a.b") == "/x?not_a_ticket=a.b"
