"""A tenant secret is never in clear. Used in an MCP server's headers, with the server echoing
it back upper-cased and base64-encoded (a failed call, then a failed `tools/list`), its value
shows in no database row, log line, span, API answer, console page or model request; a value a
header cannot carry (not ASCII) is refused before anything is stored, and at call time is
named by a message that shows no character of it."""

import base64
import binascii
import io
import json
import logging
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus
from uuid import uuid4

import mcp_types as types
from aiohttp import web
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import select

from app.api import create_app
from app.api.serving import serve_locally
from app.resources.secrets.store import SecretRepository
from app.storage.tables import metadata
from tests.api.helpers import assert_invalid, configure, open_network, stream, submit
from tests.api.tools import TEST_TOOLS
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL, Service, service_settings
from tests.tools.net.servers import serve

ADMIN = {"sub": "root", "roles": ("tenant_admin",)}
VALUE = "Mx7-SeCrEt_tOkEn-qWeRtY-2026"  # mixed case: echoed upper-cased it is another text
NOT_ASCII = "Pässwort-Geheim-2026"
SECRET_NAME = "MCP_TOKEN"
# A tool whose description quotes the caller's token, as a careless server's might.
TELLING = types.Tool(
    name="telling",
    description=f"Answers {VALUE.upper()}'s questions.",
    input_schema={"type": "object", "properties": {}},
)


def _decoded_runs(text: str) -> list[str]:
    """Every base64 (standard or URL-safe, any alignment) and hex run of `text`, decoded."""
    decoded: list[str] = []
    for run in re.findall(r"[A-Za-z0-9+/_-]{12,}", text):
        normal = run.replace("-", "+").replace("_", "/")
        for start in range(4):
            piece = normal[start:]
            piece = piece[: len(piece) - len(piece) % 4]
            try:
                decoded.append(base64.b64decode(piece).decode("latin-1"))
            except binascii.Error:
                continue
    for run in re.findall(r"[0-9A-Fa-f]{16,}", text):
        for start in range(2):
            piece = run[start:]
            decoded.append(bytes.fromhex(piece[: len(piece) - len(piece) % 2]).decode("latin-1"))
    return decoded


def _assert_nowhere(what: str, text: str, value: str = VALUE) -> None:
    """`value` is in `text` in none of its forms: any case, URL- or JSON-escaped, base64, hex."""
    wanted = value.lower()
    unescaped = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m[1], 16)), text)
    for form in (text, unquote_plus(text), unescaped):
        assert wanted not in form.lower(), f"{what} holds the secret"
    for decoded in _decoded_runs(text):
        assert wanted not in decoded.lower(), f"{what} holds the secret encoded"


async def _database_dump(service: Service) -> dict[str, str]:
    """Every row of every table, all columns, as text."""
    dump: dict[str, str] = {}
    async with service.state.database.read() as connection:
        for table in metadata.sorted_tables:
            rows = (await connection.execute(select(table))).all()
            dump[table.name] = "\n".join(
                json.dumps([str(cell) for cell in row], ensure_ascii=False) for row in rows
            )
    return dump


async def test_a_secret_echoed_upper_cased_and_in_base64_is_nowhere_in_clear(
    database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    logs = io.StringIO()
    handler = logging.StreamHandler(logs)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)  # configured before the service starts, as `omniforge serve` does
    previous_level = root.level
    root.setLevel(logging.INFO)
    exporter = InMemorySpanExporter()
    settings = service_settings(tmp_path, database_url, fake_llm)
    app = create_app(settings, tools=TEST_TOOLS, span_exporter=exporter)
    answers: dict[str, str] = {}
    try:
        async with (
            serve_locally(app) as base_url,
            FakeMcpServer(
                token="a-token-the-tenant-lacks", echo_encoded=True, extra_tools=[TELLING]
            ) as mcp_server,
        ):
            service = Service(base_url, app, settings, fake_llm)
            tenant = await service.create_tenant(f"e-{uuid4().hex[:12]}", enabled_tools=None)
            await open_network(service, tenant, ["127.0.0.1/32"])
            secrets = f"/api/v1/tenants/{tenant}/secrets"
            servers = f"/api/v1/tenants/{tenant}/mcp-servers"

            def headers(name: str) -> dict[str, Any]:
                return {"Authorization": {"secret": name, "prefix": "Bearer "}}

            async with service.client(tenant, **ADMIN) as admin:
                put = await admin.put(f"{secrets}/{SECRET_NAME}", json={"value": VALUE})
                # Any text may be a secret; one that a header cannot carry is refused where
                # a header would send it, before anything is stored.
                put_wide = await admin.put(f"{secrets}/WIDE", json={"value": NOT_ASCII})
                refused = await admin.post(
                    servers,
                    json={"name": "wide", "url": mcp_server.url, "headers": headers("WIDE")},
                )
                after_refusal = await admin.get(servers)
                created = await admin.post(
                    servers,
                    json={"name": "fake", "url": mcp_server.url, "headers": headers(SECRET_NAME)},
                )
                refused_value = await admin.put(
                    f"{secrets}/{SECRET_NAME}", json={"value": NOT_ASCII}
                )

            assert put.status_code == 201, put.text
            assert put_wide.status_code == 201, put_wide.text
            body = assert_invalid(refused, "body.headers.Authorization")
            assert "cannot carry" in body["errors"][0]["message"]
            assert after_refusal.json()["items"] == []
            assert created.status_code == 201, created.text
            assert created.json()["status"] == "ok"
            body = assert_invalid(refused_value, "body.value")
            assert "header 'Authorization' of the MCP server 'fake'" in body["errors"][0]["message"]
            for response in (refused, refused_value):
                _assert_nowhere("a refusal", response.text, NOT_ASCII)
                assert "ä" not in response.text
                assert "position" not in response.text

            # A run calls the server's tool, which fails echoing the header it got.
            fake_llm.script(
                MODEL,
                Reply.tool_calls([ToolCall("fake__whoami", {}, id="w1")]),
                Reply.text("The server refused the token."),
            )
            async with service.client(tenant) as member:
                accepted = await submit(member, input="Who am I on the server?")
                events = await stream(member, accepted["task_id"])
            # Then its tools/list fails, echoing it too.
            mcp_server.fail_listing = True
            async with service.client(tenant, **ADMIN) as admin:
                server_id = created.json()["id"]
                refreshed = await admin.post(f"{servers}/{server_id}/refresh")
                answers["server"] = (await admin.get(f"{servers}/{server_id}")).text
                answers["servers"] = (await admin.get(servers)).text
                answers["secrets"] = (await admin.get(secrets)).text
                answers["chain"] = (
                    await admin.get(f"/api/v1/tasks/{accepted['task_id']}/chain")
                ).text
                answers["export"] = (
                    await admin.get(f"/api/v1/chains/{accepted['chain_id']}/export")
                ).text
                answers["audit"] = (
                    await admin.get(f"/api/v1/tenants/{tenant}/audit", params={"limit": 200})
                ).text
                answers["console"] = (await admin.get("/console/settings/mcp-servers")).text
            async with service.client(tenant, sub="ops", roles=("platform_admin",)) as platform:
                answers["platform"] = (await platform.get(servers)).text
            answers |= {"created": created.text, "refreshed": refreshed.text}
            answers["events"] = json.dumps([(e.event, e.data) for e in events])

            # At call time, a value stored before these checks (or by another way) that a
            # header cannot carry fails by a message that shows none of it.
            vault = service.state.toolbox.secrets
            assert vault is not None
            sealed = vault.seal(tenant, SECRET_NAME, NOT_ASCII)
            async with service.state.database.transaction() as connection:
                await SecretRepository(connection, tenant).put(
                    SECRET_NAME,
                    key_id=sealed.key_id,
                    sealed=sealed.text,
                    by="x",
                    at=datetime.now(UTC),
                )
            vault.changed(tenant)
            mcp_server.fail_listing = False
            async with service.client(tenant, **ADMIN) as admin:
                unsendable = await admin.post(f"{servers}/{server_id}/refresh")
            dump = await _database_dump(service)
        model_requests = json.dumps([request.body for request in fake_llm.requests])
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)

    # The server did echo it, and what it said is kept, with the value masked.
    detail = refreshed.json()["status_detail"]
    assert refreshed.json()["status"] == "error"
    assert "AUTHORIZATION: BEARER [secret] (base64 QmVhcmVy" in detail, detail
    results = [
        e.json["step"]["tool_result"]
        for e in events
        if e.event == "reasoning_step" and e.json["step"]["type"] == "tool_result"
    ]
    whoami = next(r for r in results if not r["success"])
    assert "AUTHORIZATION: BEARER [secret]" in whoami["error"]
    assert "401 unauthorized" in model_requests
    assert "Answers [secret]'s questions." in model_requests  # the tool offered, masked
    # ... and a value a header cannot carry is named by no character of it.
    failed = unsendable.json()["status_detail"]
    assert unsendable.json()["status"] == "error"
    assert "the header 'Authorization' cannot be sent" in failed
    for leak in ("ä", "position", "codec"):
        assert leak not in failed

    spans = exporter.get_finished_spans()
    assert spans, "the run was traced"
    span_text = json.dumps(
        [
            [span.name, dict(span.attributes or {}), str(span.status.description)]
            + [[event.name, dict(event.attributes or {})] for event in span.events]
            for span in spans
        ]
    )
    texts = {
        **{f"answer {name}": text for name, text in answers.items()},
        **{f"table {name}": rows for name, rows in dump.items()},
        "log lines": logs.getvalue(),
        "spans": span_text,
        "model requests": model_requests,
    }
    # What was written of the echoes is there, masked: the failed call's step and audit row.
    assert "AUTHORIZATION: BEARER [secret]" in texts["table audit_events"]
    assert "cannot be sent" in texts["table mcp_servers"]
    assert logs.getvalue(), "the service logged"
    for what, text in texts.items():
        _assert_nowhere(what, text)
        _assert_nowhere(what, text, NOT_ASCII)


async def test_http_request_refuses_a_secret_a_header_cannot_carry_naming_none_of_it(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "tools", {"enabled_tools": ["http_request"]})
    await open_network(service, tenant, ["127.0.0.1/32"])
    async with service.client(tenant, **ADMIN) as admin:
        put = await admin.put(f"/api/v1/tenants/{tenant}/secrets/WIDE", json={"value": NOT_ASCII})
    assert put.status_code == 201, put.text
    seen: list[str] = []

    async def echo(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response({})

    site = web.Application()
    site.router.add_post("/echo", echo)
    async with serve(site) as port:
        arguments = {
            "method": "POST",
            "url": f"http://127.0.0.1:{port}/echo",
            "headers": {"X-Api-Key": {"secret": "WIDE"}},
        }
        fake_llm = service.fake_llm
        fake_llm.script(
            MODEL,
            Reply.tool_calls([ToolCall("http_request", arguments, id="h1")]),
            Reply.text("It could not be sent."),
        )
        async with service.client(tenant) as member:
            accepted = await submit(member, input="Call the API.")
            events = await stream(member, accepted["task_id"])

    assert seen == []
    [result] = [
        e.json["step"]["tool_result"]
        for e in events
        if e.event == "reasoning_step"
        and e.json["step"]["type"] == "tool_result"
        and e.json["step"]["tool_result"]["tool_name"] == "http_request"
    ]
    assert result["error_code"] == "invalid_arguments"
    assert "headers.X-Api-Key: has characters a header cannot carry" in result["error"]
    for leak in ("ä", "\\u00e4", "\\xe4", "position", "codec"):
        assert leak not in json.dumps([(e.event, e.data) for e in events])
    _assert_nowhere("the stream", json.dumps([(e.event, e.data) for e in events]), NOT_ASCII)
