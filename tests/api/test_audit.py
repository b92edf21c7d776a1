"""The audit log: tool calls, configuration changes and chain reads, each with its actor;
filtered and paginated; append-only down to the database."""

from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.chain import format_usd
from tests.api.helpers import assert_problem, submit
from tests.api.test_visibility import POLICY, SECRET, TOOLS, _script
from tests.service import Service
from tests.sse import collect


async def _audit(service: Service, tenant: str, **params: Any) -> list[dict[str, Any]]:
    async with service.client(tenant, sub="eve", roles=("auditor",)) as client:
        response = await client.get(f"/api/v1/tenants/{tenant}/audit", params=params)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_tool_calls_configuration_changes_and_chain_reads_are_audited_with_their_actor(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        await admin.put(f"/api/v1/tenants/{tenant}/tools", json={"enabled_tools": TOOLS})
        await admin.put(f"/api/v1/tenants/{tenant}/visibility", json=POLICY)
    _script(service)
    async with service.client(tenant, sub="alice", roles=("member",)) as member:
        accepted = await submit(member, input="Store the db credential.")
        async with member.stream("GET", f"/api/v1/tasks/{accepted['task_id']}/events") as r:
            await collect(r)
    async with service.client(tenant, sub="vic", roles=("viewer",)) as viewer:
        assert (await viewer.get(f"/api/v1/chains/{accepted['chain_id']}")).status_code == 200

    [change] = await _audit(service, tenant, action="tenant.visibility.update")
    assert change["actor"] == "root"
    assert change["resource_type"] == "tenant"
    assert change["resource_id"] == tenant
    assert change["details"]["before"] == {"visibility": {}}
    assert change["details"]["after"]["visibility"]["tools"] == POLICY["tools"]

    tool_events = await _audit(service, tenant, action="tool.execute")
    by_tool = {event["resource_id"]: event for event in tool_events}
    assert set(by_tool) == {"llm", *TOOLS}
    assert len(tool_events) == 7  # four LLM calls, three tools
    vault = by_tool["vault_store"]
    assert vault["actor"] == "alice"
    assert vault["details"]["arguments"] == {"name": "db", "password": "[REDACTED]"}
    assert vault["details"]["outcome"] == "success"
    assert vault["details"]["task_id"] == accepted["task_id"]
    assert vault["details"]["result"] == {"name": "db", "stored": True}  # audit_level full
    llm = [event for event in tool_events if event["resource_id"] == "llm"]
    costs = [event["details"]["cost_usd"] for event in llm]
    # Priced, and written as the API writes money ("0.000021", not "0.000021000000").
    assert all(Decimal(cost) > 0 and cost == format_usd(Decimal(cost)) for cost in costs)
    assert "result" not in by_tool["calculator"]["details"]  # audit_level basic

    reads = await _audit(service, tenant, action="chain.*")
    actions = {(event["action"], event["actor"], event["details"]["served"]) for event in reads}
    assert actions == {("chain.stream", "alice", "filtered"), ("chain.read", "vic", "filtered")}
    assert {event["resource_id"] for event in reads} == {accepted["chain_id"]}
    async with service.client(tenant, sub="eve", roles=("auditor",)) as auditor:
        raw = await auditor.get(f"/api/v1/tenants/{tenant}/audit", params={"limit": 200})
    assert SECRET not in raw.text


async def test_the_audit_log_pages_newest_first_and_filters_by_actor(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        for level in ("full", "summary", "hidden"):
            body = {"tool_types": {"custom": level}}
            assert (await admin.put(f"/api/v1/tenants/{tenant}/visibility", json=body)).is_success
        first = await admin.get(f"/api/v1/tenants/{tenant}/audit", params={"limit": 2})
        second = await admin.get(
            f"/api/v1/tenants/{tenant}/audit",
            params={"limit": 2, "cursor": first.json()["next_cursor"]},
        )
        nobody = await admin.get(f"/api/v1/tenants/{tenant}/audit", params={"actor": "nobody"})
        bad = await admin.get(f"/api/v1/tenants/{tenant}/audit", params={"cursor": "%%%"})

    levels = [
        e["details"]["after"]["visibility"]["tool_types"]["custom"] for e in first.json()["items"]
    ]
    assert levels == ["hidden", "summary"]
    assert [
        e["details"]["after"]["visibility"]["tool_types"]["custom"] for e in second.json()["items"]
    ] == ["full"]
    assert second.json()["next_cursor"] is None
    assert nobody.json() == {"items": [], "next_cursor": None}
    assert_problem(bad, 422, "validation-error")


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE", "POST"])
async def test_no_route_edits_or_deletes_the_audit_log(
    service: Service, tenant: str, method: str
) -> None:
    async with service.client(tenant, sub="root", roles=("platform_admin",)) as admin:
        response = await admin.request(method, f"/api/v1/tenants/{tenant}/audit")
    assert_problem(response, 405, "method-not-allowed")
    assert response.headers["Allow"] == "GET"


@pytest.mark.parametrize(
    "statement", ["UPDATE audit_events SET actor = 'mallory'", "DELETE FROM audit_events"]
)
async def test_the_database_refuses_to_change_or_delete_audit_events(
    service: Service, tenant: str, statement: str
) -> None:
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        await admin.put(f"/api/v1/tenants/{tenant}/visibility", json={})
    with pytest.raises(DBAPIError, match="append-only"):
        async with service.state.database.transaction() as connection:
            await connection.execute(text(f"{statement} WHERE tenant_id = :t"), {"t": tenant})
    assert len(await _audit(service, tenant)) == 1


async def test_opening_a_stream_is_audited_without_delaying_it(
    service: Service, tenant: str
) -> None:
    _script(service)
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        await admin.put(f"/api/v1/tenants/{tenant}/tools", json={"enabled_tools": TOOLS})
        accepted = await submit(admin, input="Store the db credential.")
        async with admin.stream("GET", f"/api/v1/tasks/{accepted['task_id']}/events") as r:
            await collect(r)
    # The run has ended: nothing else will be written with this stream's audit row.
    url = f"/api/v1/tasks/{accepted['task_id']}/events"
    async with (
        service.client(tenant, sub="late", roles=("viewer",)) as viewer,
        viewer.stream("GET", url, params={"after": 3}) as r,
    ):
        await collect(r)
    # Stream openings are stored with the next write; an awaited one is the barrier here.
    await service.state.runs.record_audit([])

    streams = await _audit(service, tenant, action="chain.stream")
    assert [(e["actor"], e["details"]["served"], e["details"]["after"]) for e in streams] == [
        ("late", "filtered", 3),
        ("root", "full", 0),
    ]
