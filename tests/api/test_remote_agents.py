"""A tenant's remote A2A agents over the API: registered by card URL against a real agent (the
`a2a-sdk`'s server on 127.0.0.1, reached through the tenant's network allow-list), their
skills offered as tools, changed, removed and audited; cards that cannot be fetched or used,
addresses the SSRF guard refuses, other tenants and roles without the permission refused."""

import json
from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import pytest

from tests.api.helpers import assert_invalid, assert_problem, open_network
from tests.fakes.a2a_agent import NOT_A_CARD_PATH, TOKEN, FakeA2AAgent
from tests.service import Service

ADMIN = {"sub": "root", "roles": ("tenant_admin",)}
SECRET = "AGENT_TOKEN"
AUTHORIZATION = {"Authorization": {"secret": SECRET, "prefix": "Bearer "}}


@pytest.fixture
async def agent() -> AsyncIterator[FakeA2AAgent]:
    async with FakeA2AAgent(token=TOKEN) as server:
        yield server


@pytest.fixture
async def a2a_tenant(service: Service) -> str:
    """A tenant whose runs may use every tool and reach 127.0.0.1, where the test's agent
    listens, with the agent's token as a secret."""
    return await tenant_reaching_agents(service)


async def tenant_reaching_agents(service: Service) -> str:
    tenant = await service.create_tenant(f"r-{uuid4().hex[:12]}", enabled_tools=None)
    await open_network(service, tenant, ["127.0.0.1/32"])
    async with service.client(tenant, **ADMIN) as admin:
        response = await admin.put(
            f"/api/v1/tenants/{tenant}/secrets/{SECRET}", json={"value": TOKEN}
        )
    assert response.status_code in (200, 201), response.text
    return tenant


def base(tenant: str) -> str:
    return f"/api/v1/tenants/{tenant}/remote-agents"


async def register(
    service: Service, tenant: str, agent: FakeA2AAgent, **fields: Any
) -> dict[str, Any]:
    body = {"name": "fake", "card_url": agent.card_url, "headers": AUTHORIZATION, **fields}
    async with service.client(tenant, **ADMIN) as admin:
        response = await admin.post(base(tenant), json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def tool_names(service: Service, tenant: str) -> set[str]:
    async with service.client(tenant) as member:
        return {t["name"] for t in (await member.get("/api/v1/tools")).json()["items"]}


async def test_a_registered_agents_skills_are_offered_as_sub_agent_tools(
    service: Service, a2a_tenant: str, agent: FakeA2AAgent
) -> None:
    created = await register(service, a2a_tenant, agent)

    assert created["name"] == "fake"
    assert created["card_url"] == agent.card_url
    assert created["headers"] == AUTHORIZATION
    assert created["enabled"] is True
    assert created["agent_name"] == "Fake researcher"
    assert created["streaming"] is True
    assert created["card"]["name"] == "Fake researcher"
    assert [(s["name"], s["skill"], s["title"]) for s in created["skills"]] == [
        ("fake__research", "research", "Research"),
        ("fake__wait", "wait", "Wait"),
    ]
    assert created["skipped_skills"] == []
    async with service.client(a2a_tenant) as member:
        listed = {t["name"]: t for t in (await member.get("/api/v1/tools")).json()["items"]}
    research = listed["fake__research"]
    assert research["type"] == "sub_agent"
    assert research["description"] == (
        "Researches a question and answers it. (a skill of the remote agent Fake researcher: "
        "Answers questions after some research.)"
    )
    assert research["parameters"]["required"] == ["message"]
    assert research["parameters"]["properties"]["message"]["type"] == "string"
    assert research["usable"] is True
    assert "fake__wait" in listed
    # The card is public: fetched without the token being needed, but with it sent.
    assert agent.received == []


async def test_an_agents_bare_address_means_its_well_known_card(
    service: Service, a2a_tenant: str, agent: FakeA2AAgent
) -> None:
    created = await register(service, a2a_tenant, agent, card_url=agent.base_url)

    assert created["card_url"] == agent.card_url
    assert [s["name"] for s in created["skills"]] == ["fake__research", "fake__wait"]


async def test_an_agent_is_listed_read_changed_and_removed(
    service: Service, a2a_tenant: str, agent: FakeA2AAgent
) -> None:
    created = await register(service, a2a_tenant, agent)
    one = f"{base(a2a_tenant)}/{created['id']}"
    async with service.client(a2a_tenant, **ADMIN) as admin:
        listed = (await admin.get(base(a2a_tenant))).json()["items"]
        read = (await admin.get(one)).json()

        disabled = await admin.patch(one, json={"enabled": False})
        assert disabled.status_code == 200, disabled.text
        without = await tool_names(service, a2a_tenant)

        renamed = await admin.patch(one, json={"enabled": True, "name": "scholar"})
        assert renamed.status_code == 200, renamed.text
        with_new_names = await tool_names(service, a2a_tenant)

        refreshed = await admin.patch(one, json={"refresh": True})
        assert refreshed.status_code == 200, refreshed.text

        deleted = await admin.delete(one)
        gone = await admin.get(one)
        after = (await admin.get(base(a2a_tenant))).json()["items"]

    assert [item["id"] for item in listed] == [created["id"]]
    assert read == created
    assert disabled.json()["enabled"] is False
    assert not any(name.startswith("fake__") for name in without)
    assert [s["name"] for s in renamed.json()["skills"]] == ["scholar__research", "scholar__wait"]
    assert {"scholar__research", "scholar__wait"} <= with_new_names
    assert not any(name.startswith("fake__") for name in with_new_names)
    assert refreshed.json()["fetched_at"] > created["fetched_at"]
    assert deleted.status_code == 204
    assert_problem(gone, 404, "not-found")
    assert after == []
    assert not any(name.startswith("scholar__") for name in await tool_names(service, a2a_tenant))


async def test_names_are_unique_among_remote_agents_and_mcp_servers(
    service: Service, a2a_tenant: str, agent: FakeA2AAgent
) -> None:
    await register(service, a2a_tenant, agent)
    async with service.client(a2a_tenant, **ADMIN) as admin:
        again = await admin.post(
            base(a2a_tenant), json={"name": "fake", "card_url": agent.card_url}
        )
        server = await admin.post(
            f"/api/v1/tenants/{a2a_tenant}/mcp-servers",
            json={"name": "tools", "url": "http://127.0.0.1:9/mcp"},
        )
        assert server.status_code == 201, server.text
        as_server = await admin.post(
            base(a2a_tenant), json={"name": "tools", "card_url": agent.card_url}
        )
    body = assert_problem(again, 409, "remote-agent-exists")
    assert "'fake'" in body["detail"]
    body = assert_problem(as_server, 409, "remote-agent-exists")
    assert "an MCP server named 'tools'" in body["detail"]


async def test_an_address_the_guard_refuses_is_a_validation_problem(
    service: Service, agent: FakeA2AAgent
) -> None:
    tenant = await service.create_tenant(f"n-{uuid4().hex[:12]}", enabled_tools=None)
    async with service.client(tenant, **ADMIN) as admin:
        response = await admin.post(base(tenant), json={"name": "x", "card_url": agent.card_url})
        listed = (await admin.get(base(tenant))).json()["items"]

    body = assert_invalid(response, "body.card_url")
    assert body["errors"][0]["message"].startswith(f"refused {agent.card_url}: 127.0.0.1 is ")
    assert "network allow-list" in body["errors"][0]["message"]
    assert listed == []
    assert agent.received == []


async def test_cards_that_cannot_be_fetched_or_used_are_validation_problems(
    service: Service, a2a_tenant: str, agent: FakeA2AAgent
) -> None:
    cards = {
        f"{agent.base_url}/no-card.json": "answered HTTP 404, not an agent card",
        f"{agent.base_url}{NOT_A_CARD_PATH}": "its agent card lists no skills",
        # The agent's A2A endpoint refuses a caller without its token.
        f"{agent.base_url}/a2a/jsonrpc": "answered HTTP 401, not an agent card",
        "http://127.0.0.1:9/.well-known/agent-card.json": "",
    }
    async with service.client(a2a_tenant, **ADMIN) as admin:
        answers = {
            url: await admin.post(base(a2a_tenant), json={"name": "x", "card_url": url})
            for url in cards
        }
        listed = (await admin.get(base(a2a_tenant))).json()["items"]

    for url, said in cards.items():
        body = assert_invalid(answers[url], "body.card_url")
        assert body["detail"].startswith(f"the agent card at {url} cannot be used: ")
        assert said in body["errors"][0]["message"]
    assert listed == []


async def test_a_missing_secret_is_a_validation_problem_naming_the_headers(
    service: Service, a2a_tenant: str, agent: FakeA2AAgent
) -> None:
    async with service.client(a2a_tenant, **ADMIN) as admin:
        response = await admin.post(
            base(a2a_tenant),
            json={
                "name": "x",
                "card_url": agent.card_url,
                "headers": {"Authorization": {"secret": "NOT_SET"}},
            },
        )
    body = assert_invalid(response, "body.headers")
    assert "'NOT_SET' is not set for this tenant" in body["errors"][0]["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "Bad Name", "card_url": "http://127.0.0.1:1/"}, "body.name"),
        ({"name": "x" * 32, "card_url": "http://127.0.0.1:1/"}, "body.name"),
        ({"name": "ok", "card_url": "ftp://127.0.0.1/card.json"}, "body.card_url"),
        ({"name": "ok", "card_url": "http://user:pw@127.0.0.1/"}, "body.card_url"),
        ({"name": "ok", "card_url": "not a url"}, "body.card_url"),
        (
            {"name": "ok", "card_url": "http://127.0.0.1:1/", "headers": {"A2A-Version": "9"}},
            "body.headers",
        ),
        (
            {"name": "ok", "card_url": "http://127.0.0.1:1/", "headers": {"X": {"secret": "1"}}},
            "body.headers",
        ),
        ({"name": "ok", "card_url": "http://127.0.0.1:1/", "surprise": 1}, "body.surprise"),
    ],
)
async def test_invalid_registrations_are_refused_naming_the_field(
    service: Service, tenant: str, body: dict[str, Any], field: str
) -> None:
    async with service.client(tenant, **ADMIN) as admin:
        response = await admin.post(base(tenant), json=body)
    assert_invalid(response, field)


async def test_a_path_id_that_is_not_a_uuid_is_a_validation_problem(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, **ADMIN) as admin:
        response = await admin.get(f"{base(tenant)}/not-a-uuid")
    assert_invalid(response, "path.remote_agent_id")


async def test_changes_are_audited_with_secret_references_and_no_values(
    service: Service, a2a_tenant: str, agent: FakeA2AAgent
) -> None:
    created = await register(
        service, a2a_tenant, agent, headers={**AUTHORIZATION, "X-Team": "blue"}
    )
    async with service.client(a2a_tenant, **ADMIN) as admin:
        one = f"{base(a2a_tenant)}/{created['id']}"
        patched = await admin.patch(one, json={"headers": AUTHORIZATION, "enabled": False})
        assert patched.status_code == 200, patched.text
        assert (await admin.delete(one)).status_code == 204
        audit = (
            await admin.get(f"/api/v1/tenants/{a2a_tenant}/audit", params={"limit": 200})
        ).json()["items"]

    rows = {row["action"]: row for row in audit if row["resource_type"] == "remote_agent"}
    assert set(rows) == {"remote_agent.create", "remote_agent.update", "remote_agent.delete"}
    assert all(row["resource_id"] == created["id"] for row in rows.values())
    assert rows["remote_agent.create"]["actor"] == "root"
    assert rows["remote_agent.create"]["details"]["after"] == {
        "name": "fake",
        "card_url": agent.card_url,
        "headers": {**AUTHORIZATION, "X-Team": "[text]"},
        "enabled": True,
        "skills": ["research", "wait"],
    }
    assert rows["remote_agent.update"]["details"] == {
        "before": {"headers": {**AUTHORIZATION, "X-Team": "[text]"}, "enabled": True},
        "after": {"headers": AUTHORIZATION, "enabled": False},
        "actor_tenant": a2a_tenant,
    }
    assert rows["remote_agent.delete"]["details"]["after"] is None
    assert TOKEN not in json.dumps(audit)
    assert "blue" not in json.dumps(audit)


async def test_members_may_not_manage_agents_and_other_tenants_agents_do_not_exist(
    service: Service, a2a_tenant: str, other_tenant: str, agent: FakeA2AAgent
) -> None:
    created = await register(service, a2a_tenant, agent)
    one = f"{base(a2a_tenant)}/{created['id']}"
    async with service.client(a2a_tenant) as member:
        for response in [
            await member.get(base(a2a_tenant)),
            await member.get(one),
            await member.patch(one, json={"enabled": False}),
            await member.delete(one),
            await member.post(base(a2a_tenant), json={"name": "x", "card_url": agent.card_url}),
        ]:
            body = assert_problem(response, 403, "forbidden")
            assert body["permission"] == "tool:configure"
    async with service.client(other_tenant, **ADMIN) as stranger:
        for response in [
            await stranger.get(base(a2a_tenant)),
            await stranger.get(one),
            await stranger.patch(one, json={"name": "mine"}),
            await stranger.delete(one),
            await stranger.post(base(a2a_tenant), json={"name": "x", "card_url": agent.card_url}),
        ]:
            assert_problem(response, 404, "not-found")
        theirs = f"{base(other_tenant)}/{created['id']}"
        for response in [
            await stranger.get(theirs),
            await stranger.patch(theirs, json={"name": "mine"}),
            await stranger.delete(theirs),
        ]:
            assert_problem(response, 404, "not-found")
        tools = {t["name"] for t in (await stranger.get("/api/v1/tools")).json()["items"]}
    assert not any(name.startswith("fake__") for name in tools)
    async with service.client(a2a_tenant, **ADMIN) as admin:
        assert (await admin.get(one)).json()["name"] == "fake"
