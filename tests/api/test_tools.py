"""/api/v1/tools shows, for each tool, whether a call may be made again when a run resumes and
the call's outcome is unknown (`idempotent`): as the built-in and the operator's tools declare
it, and for a tenant's MCP servers' tools as the server's annotations say."""

from typing import Any
from uuid import uuid4

import mcp_types as types

from tests.api.helpers import open_network
from tests.fakes.mcp_server import FakeMcpServer
from tests.service import Service

_ANY: dict[str, Any] = {"type": "object", "properties": {}}


async def _listed(service: Service, tenant: str) -> dict[str, dict[str, Any]]:
    async with service.client(tenant) as member:
        response = await member.get("/api/v1/tools")
    assert response.status_code == 200, response.text
    return {tool["name"]: tool for tool in response.json()["items"]}


async def test_each_tool_shows_whether_it_may_be_repeated(service: Service) -> None:
    tenant = await service.create_tenant(f"i-{uuid4().hex[:12]}", enabled_tools=None)

    listed = await _listed(service, tenant)

    expected = {
        "calculator": True,
        "web_fetch": True,
        "read_file": True,
        "todo_list": True,
        "http_request": False,
        "todo_add": False,
        "vault_store": False,  # the operator's own tool, which does not say
    }
    assert {name: listed[name]["idempotent"] for name in expected} == expected
    assert all(isinstance(tool["idempotent"], bool) for tool in listed.values())


async def test_an_mcp_servers_tools_are_idempotent_as_its_annotations_say(
    service: Service,
) -> None:
    tenant = await service.create_tenant(f"i-{uuid4().hex[:12]}", enabled_tools=None)
    await open_network(service, tenant, ["127.0.0.1/32"])
    annotated = [
        types.Tool(
            name="lookup",
            input_schema=_ANY,
            annotations=types.ToolAnnotations(idempotent_hint=True),
        ),
        types.Tool(
            name="peek", input_schema=_ANY, annotations=types.ToolAnnotations(read_only_hint=True)
        ),
    ]
    async with FakeMcpServer(extra_tools=annotated) as server:
        async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
            created = await admin.post(
                f"/api/v1/tenants/{tenant}/mcp-servers", json={"name": "fake", "url": server.url}
            )
        assert created.status_code == 201, created.text
        assert created.json()["status"] == "ok"

        listed = await _listed(service, tenant)

    mcp = {name: tool["idempotent"] for name, tool in listed.items() if name.startswith("fake__")}
    assert mcp == {
        "fake__add": False,
        "fake__whoami": False,
        "fake__slow_count": False,
        "fake__lookup": True,
        "fake__peek": True,
    }


async def test_each_tool_shows_what_its_results_hold_and_whether_it_sends_data_out(
    service: Service,
) -> None:
    tenant = await service.create_tenant(f"i-{uuid4().hex[:12]}", enabled_tools=None)

    listed = await _listed(service, tenant)

    flows = {
        name: (tool["untrusted_output"], tool["private_output"], tool["egress"])
        for name, tool in listed.items()
        if name in {"web_fetch", "http_request", "read_file", "list_files", "calculator"}
    }
    assert flows == {
        "web_fetch": (True, False, "url"),
        "http_request": (True, False, "url"),
        "read_file": (False, True, "none"),
        # Its results name others' files at most: labelled per call (`labels`), not declared.
        "list_files": (False, False, "none"),
        "calculator": (False, False, "none"),
    }
