"""JSON log lines: one object per line with the ids of what it is about, masked as text lines
are (secret values, credentials); and every request named by an id its response echoes."""

import io
import json
import logging
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest

from app.observability.json_logs import JsonFormatter
from app.observability.log_context import bind_run, request_logged_as, tenant_logged_as
from app.security import mint_token
from app.security.log_masking import SecretMasker, install_log_masking
from tests.service import JWT_SECRET, Service

SECRET = "sk-live-4f9c2a7e1b"


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    """What a JSON handler of the root logger writes, masking installed as the service
    installs it (after logging is configured)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)
    masker = SecretMasker("[secret]", min_chars=4)
    masker.learn([SECRET])
    uninstall = install_log_masking(masker)
    try:
        yield out
    finally:
        uninstall()
        root.setLevel(level)
        root.removeHandler(handler)


def _parsed(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_line_carries_the_ids_known_where_it_is_logged(lines: io.StringIO) -> None:
    logger = logging.getLogger("tests.json_logs")
    task_id, chain_id = uuid4(), uuid4()

    logger.info("outside")
    with request_logged_as("req-1"), tenant_logged_as("acme"):
        logger.info("in a request")
        unbind = bind_run("acme", task_id, chain_id)
        logger.info("in a run")
        unbind()
        logger.info("back in the request")

    outside, request, run, back = _parsed(lines)
    assert set(outside) == {"timestamp", "level", "logger", "message"}
    assert outside["level"] == "INFO"
    assert outside["logger"] == "tests.json_logs"
    assert outside["timestamp"].endswith("+00:00")
    assert request["request_id"] == "req-1"
    assert request["tenant_id"] == "acme"
    assert "task_id" not in request
    assert run["tenant_id"] == "acme"
    assert (run["task_id"], run["chain_id"]) == (str(task_id), str(chain_id))
    assert "request_id" not in run  # a run outlives the request that started it
    assert back == {**request, "timestamp": back["timestamp"], "message": "back in the request"}


def test_secrets_and_credentials_never_reach_a_json_line(lines: io.StringIO) -> None:
    token = mint_token(JWT_SECRET, tenant_id="acme", subject="alice", roles=("member",))
    api_key = "omf_" + "k" * 43
    logger = logging.getLogger("tests.json_logs")

    logger.warning("calling with %s and Authorization: Bearer %s", SECRET, "opaque-token-77")
    logger.warning("headers %r", {"authorization": f"Bearer {token}", "x-api-key": api_key})
    try:
        raise RuntimeError(f"refused {SECRET} for {token}")
    except RuntimeError:
        logger.exception("the call failed")

    text = lines.getvalue()
    for leaked in (SECRET, token, api_key, "opaque-token-77"):
        assert leaked not in text
    first, second, failed = _parsed(lines)
    assert first["message"] == ("calling with [secret] and Authorization: Bearer [credential]")
    assert "[credential]" in second["message"]
    assert failed["exception"].endswith("RuntimeError: refused [secret] for [credential]")


def test_an_access_line_names_its_request_fields(lines: io.StringIO) -> None:
    access = logging.getLogger("uvicorn.access")
    record = access.makeRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", "/healthz", "1.1", 200),
        None,
    )
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == '127.0.0.1:5000 - "GET /healthz HTTP/1.1" 200'
    assert line["http"] == {
        "client": "127.0.0.1:5000",
        "method": "GET",
        "path": "/healthz",
        "version": "1.1",
        "status": 200,
    }


async def test_a_request_id_is_echoed_or_made(service: Service, tenant: str) -> None:
    async with service.client(tenant) as client:
        given = await client.get("/api/v1/tasks", headers={"X-Request-ID": "edge-7f3a:42"})
        made = await client.get("/api/v1/tasks")
        insane = await client.get("/api/v1/tasks", headers={"X-Request-ID": "a b"})
        too_long = await client.get("/api/v1/tasks", headers={"X-Request-ID": "x" * 129})
    async with service.client() as anonymous:
        refused = await anonymous.get("/api/v1/tasks", headers={"X-Request-ID": "no-auth-1"})

    assert given.status_code == 200
    assert given.headers["X-Request-ID"] == "edge-7f3a:42"
    ids = [r.headers["X-Request-ID"] for r in (made, insane, too_long)]
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    assert len(set(ids)) == 3
    assert refused.status_code == 401
    assert refused.headers["X-Request-ID"] == "no-auth-1"
    assert [r.headers.get_list("X-Request-ID") for r in (given, made)] == [
        ["edge-7f3a:42"],
        [made.headers["X-Request-ID"]],
    ]
