"""Where a remote agent's calls go, and what comes back to this service through them.

A remote agent is called only at the origin its card URL names: a card listing an interface at
another port (the `a2a-sdk`'s own server, a second one listening there and recording every
request) never sends that port anything, the tenant's secret header included; a card naming
only other origins is refused when registered. The tenant's own A2A agent registered as a remote
agent comes back to this service: the message's hop trail shows its agent already working above
it (a cycle, refused before any task or conversation is made), and the depth limit counts the
hops. A refused `SendMessage` leaves no conversation behind."""

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from uuid import uuid4

import pytest
from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import InvalidRequestError
from sqlalchemy import update

from app.storage.tables import remote_agents
from app.tools.a2a.cards import card_document
from tests.a2a_helpers import JSONRPC, a2a_client, agent_base, bearer, text_message
from tests.api.helpers import (
    assert_invalid,
    configure,
    define_agent,
    open_network,
    stream,
    submit,
)
from tests.api.test_remote_agent_calls import QUESTION, research_script, the_call
from tests.api.test_remote_agents import (
    ADMIN,
    AUTHORIZATION,
    SECRET,
    base,
    tenant_reaching_agents,
)
from tests.fakes.a2a_agent import ANSWER, TOKEN, FakeA2AAgent
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL, Service, checked, running_service, service_settings


@pytest.fixture
async def decoy() -> AsyncIterator[FakeA2AAgent]:
    """A second A2A server, on another port of the same host: nothing may reach it."""
    async with FakeA2AAgent(token=TOKEN) as server:
        yield server


def result_of(events: list[Any], tool: str) -> dict[str, Any]:
    result: dict[str, Any] = next(
        e.json["step"]["tool_result"]
        for e in events[the_call(events, tool) :]
        if e.event == "reasoning_step" and e.json["step"]["type"] == "tool_result"
    )
    return result


async def test_a_card_naming_another_port_never_sends_it_anything(
    service: Service, decoy: FakeA2AAgent
) -> None:
    tenant = await tenant_reaching_agents(service)
    # Its card lists JSON-RPC (the binding a client picks first) at the decoy's port.
    async with FakeA2AAgent(token=TOKEN, elsewhere={"JSONRPC": decoy.base_url}) as agent:
        body = {"name": "fake", "card_url": agent.card_url, "headers": AUTHORIZATION}
        async with service.client(tenant, **ADMIN) as admin:
            created = await admin.post(base(tenant), json=body)
        assert created.status_code == 201, created.text
        research_script(service)
        async with service.client(tenant) as client:
            accepted = await submit(client, input="Ask the researcher.")
            events = await stream(client, accepted["task_id"])

    result = result_of(events, "fake__research")
    assert result["success"] is True, result
    assert result["result"] == ANSWER
    assert agent.messages == [QUESTION]
    assert agent.received
    assert all(r.path.startswith("/a2a/rest/") for r in agent.received)
    assert {r.authorization for r in agent.received} == {f"Bearer {TOKEN}"}
    assert decoy.received == []
    assert decoy.messages == []


async def test_a_card_naming_only_other_origins_is_refused_when_registered(
    service: Service, decoy: FakeA2AAgent
) -> None:
    tenant = await tenant_reaching_agents(service)
    elsewhere = {"JSONRPC": decoy.base_url, "HTTP+JSON": decoy.base_url}
    async with FakeA2AAgent(token=TOKEN, elsewhere=elsewhere) as agent:
        body = {"name": "fake", "card_url": agent.card_url, "headers": AUTHORIZATION}
        async with service.client(tenant, **ADMIN) as admin:
            refused = await admin.post(base(tenant), json=body)
            listed = (await admin.get(base(tenant))).json()["items"]

    problem = assert_invalid(refused, "body.card_url")
    message = problem["errors"][0]["message"]
    assert f"none at {agent.base_url}, the origin it is registered at" in message
    assert decoy.base_url in message
    assert listed == []
    assert decoy.received == []


async def test_a_stored_card_naming_another_origin_fails_the_call_before_anything_is_sent(
    service: Service, decoy: FakeA2AAgent
) -> None:
    tenant = await tenant_reaching_agents(service)
    async with FakeA2AAgent(token=TOKEN) as agent:
        body = {"name": "fake", "card_url": agent.card_url, "headers": AUTHORIZATION}
        async with service.client(tenant, **ADMIN) as admin:
            created = await admin.post(base(tenant), json=body)
        assert created.status_code == 201, created.text
        # As a card stored before origins were checked: every interface at the decoy's port.
        elsewhere = {"JSONRPC": decoy.base_url, "HTTP+JSON": decoy.base_url}
        moved = card_document(FakeA2AAgent(elsewhere=elsewhere).card())
        async with service.state.database.transaction() as connection:
            await connection.execute(
                update(remote_agents).where(remote_agents.c.tenant_id == tenant).values(card=moved)
            )
        remote = service.state.toolbox.remote_agents
        assert remote is not None
        remote.changed(tenant)
        service.fake_llm.script(
            MODEL,
            Reply.tool_calls([ToolCall("fake__research", {"message": QUESTION}, id="c1")]),
            Reply.text("The researcher could not be reached."),
        )
        async with service.client(tenant) as client:
            accepted = await submit(client, input="Ask the researcher.")
            events = await stream(client, accepted["task_id"])

    result = result_of(events, "fake__research")
    assert result["success"] is False
    assert result["error_code"] == "destination_refused"
    assert "a remote agent is called only at the origin" in result["error"]
    assert events[-1].json["final_state"] == "completed"
    assert decoy.received == []
    assert agent.received == []


async def own_agent_registered(service: Service, tenant: str, name: str, agent: str) -> None:
    """Registers the tenant's own A2A agent `agent` as its remote agent `name`, reached on
    the service's own port, which a platform admin opened for it by name."""
    port = urlsplit(service.base_url).port
    await open_network(service, tenant, [f"127.0.0.1:{port}"])
    card_url = agent_base(service.base_url, tenant, agent) + "/.well-known/agent-card.json"
    body = {"name": name, "card_url": card_url, "headers": AUTHORIZATION}
    async with service.client(tenant, **ADMIN) as admin:
        created = await admin.post(base(tenant), json=body)
    assert created.status_code == 201, created.text


async def tenant_calling_itself(service: Service) -> str:
    tenant = f"h-{uuid4().hex[:12]}"
    token = service.token(tenant, sub="agent-robot", roles=("member",))
    await service.create_tenant(tenant, enabled_tools=None)
    async with service.client(tenant, **ADMIN) as admin:
        response = await admin.put(
            f"/api/v1/tenants/{tenant}/secrets/{SECRET}", json={"value": token}
        )
    assert response.status_code in (200, 201), response.text
    return tenant


async def tasks_and_conversations(service: Service, tenant: str) -> tuple[list[Any], list[Any]]:
    """The tenant's tasks (each with its agent's name, `agent_name`) and conversations."""
    async with service.client(tenant, **ADMIN) as admin:
        tasks = (await admin.get("/api/v1/tasks?limit=50")).json()["items"]
        conversations = (await admin.get("/api/v1/conversations")).json()["items"]
    for task in tasks:
        task["agent_name"] = (task["agent"] or {}).get("name")
    return tasks, conversations


async def call_once(
    service: Service, tenant: str, tool: str, *then: Reply
) -> tuple[str, list[Any], dict[str, Any]]:
    """A task of the tenant's default agent whose model calls `tool` once (asking "What is
    6*7?"), then replies `then`: its id, its events, and the call's result."""
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall(tool, {"message": "What is 6*7?"}, id="c1")]),
        *then,
    )
    async with service.client(tenant) as client:
        accepted = await submit(client, input=f"Ask through {tool}.")
        events = await stream(client, accepted["task_id"])
    return accepted["task_id"], events, result_of(events, tool)


async def test_the_tenants_own_agent_called_as_a_remote_agent_is_refused_as_a_cycle(
    service: Service,
) -> None:
    tenant = await tenant_calling_itself(service)
    await own_agent_registered(service, tenant, "self", "default")

    _, events, result = await call_once(
        service, tenant, "self__calculator", Reply.text("I cannot ask myself.")
    )

    assert result["success"] is False
    assert result["error_code"] == "agent_cycle"
    assert "agent 'default' already works above this message" in result["error"]
    assert "default -> default" in result["error"]
    assert events[-1].json["final_state"] == "completed"
    tasks, conversations = await tasks_and_conversations(service, tenant)
    # The run, and the task recording the call: no task of `default` was started by A2A.
    assert sorted((str(t["agent_name"]), str(t["remote_agent"])) for t in tasks) == [
        ("None", "self"),
        ("default", "None"),
    ]
    assert conversations == []


async def test_a_call_across_agents_of_this_service_is_not_a_cycle(service: Service) -> None:
    tenant = await tenant_calling_itself(service)
    await define_agent(service, tenant, "helper", tools=[])
    await own_agent_registered(service, tenant, "helper", "helper")

    task_id, _, result = await call_once(
        service,
        tenant,
        "helper__answer",
        Reply.text("42."),  # the helper's answer, through A2A
        Reply.text("The helper says 42."),
    )

    assert result["success"] is True, result
    assert result["result"] == "42."
    tasks, conversations = await tasks_and_conversations(service, tenant)
    [helper] = [t for t in tasks if t["agent_name"] == "helper"]
    # It keeps the trail it came with: the task whose call reached it.
    assert helper["metadata"] == {"a2a_trail": [task_id]}
    assert len(conversations) == 1


@pytest.fixture
async def shallow(
    own_database_url: str, shared_fake_llm: FakeLLMServer, tmp_path: Path
) -> AsyncIterator[Service]:
    """A service that nests no agents at all (`OMNIFORGE_MAX_AGENT_DEPTH=0`)."""
    settings = service_settings(tmp_path, own_database_url, shared_fake_llm, max_agent_depth=0)
    async with running_service(settings, shared_fake_llm) as running, checked(running) as service:
        yield service


async def test_the_depth_limit_counts_the_hops_through_remote_agents(shallow: Service) -> None:
    service = shallow
    tenant = await tenant_calling_itself(service)
    await define_agent(service, tenant, "helper", tools=[])
    await own_agent_registered(service, tenant, "helper", "helper")

    _, _, result = await call_once(
        service, tenant, "helper__answer", Reply.text("The helper is out of reach.")
    )

    assert result["success"] is False
    assert result["error_code"] == "agent_depth_exceeded"
    assert "agent 'helper' would run at depth 1" in result["error"]
    assert "OMNIFORGE_MAX_AGENT_DEPTH" in result["error"]
    tasks, conversations = await tasks_and_conversations(service, tenant)
    assert not [t for t in tasks if t["agent_name"] == "helper"]
    assert conversations == []


async def test_a_refused_send_message_leaves_no_conversation(service: Service, tenant: str) -> None:
    await configure(service, tenant, "quotas", {"submissions_per_minute": 1})
    service.fake_llm.script(MODEL, Reply.text("First."))
    async with service.client(tenant) as rest:
        first = await submit(rest, input="The first task of the minute.")
        await stream(rest, first["task_id"])

    async with bearer(service.token(tenant)) as http:
        client = await a2a_client(http, agent_base(service.base_url, tenant, "default"), JSONRPC)
        with pytest.raises(InvalidRequestError, match="submissions_per_minute"):
            async for _ in client.send_message(a2a.SendMessageRequest(message=text_message("Hi"))):
                pass

    tasks, conversations = await tasks_and_conversations(service, tenant)
    assert [t["id"] for t in tasks] == [first["task_id"]]
    assert conversations == []
