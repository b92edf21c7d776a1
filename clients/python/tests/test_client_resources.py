"""Conversations, agents, tools and costs through the client against the real service."""

import asyncio
from decimal import Decimal

import pytest
from omniforge_client import (
    AgentArchived,
    AgentExists,
    AsyncOmniForge,
    Forbidden,
    OmniForge,
)

from tests.api.helpers import cost_of
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service


async def test_a_conversations_turns_are_sent_and_read_back_in_order(
    service: Service, tenant: str
) -> None:
    service.fake_llm.script(
        MODEL,
        Reply.text("Hello, Ada.", prompt_tokens=50, completion_tokens=5),
        Reply.text("Your name is Ada.", prompt_tokens=80, completion_tokens=6),
    )
    async with AsyncOmniForge(service.base_url, token=service.token(tenant)) as client:
        conversation = await client.conversations.create(metadata={"channel": "chat"})
        first = await client.conversations.send(conversation.id, "I am Ada.")
        await client.tasks.wait(first.task_id)
        second = await client.conversations.send(conversation.id, "What is my name?")
        answered = await client.tasks.wait(second.task_id)
        detail = await client.conversations.get(conversation.id)
        listed = [c.id async for c in client.conversations.list()]

    # The second turn's run saw the first: the model got both questions and the answer.
    history = service.fake_llm.requests[1].body["messages"]
    assert [m["content"] for m in history[1:]] == ["I am Ada.", "Hello, Ada.", "What is my name?"]
    assert answered.conversation_id == conversation.id
    assert answered.turn == 2
    assert conversation.agent == "default"
    assert detail.metadata == {"channel": "chat"}
    assert detail.turn_count == 2
    assert [t.task_id for t in detail.turns] == [first.task_id, second.task_id]
    assert [t.answer for t in detail.turns] == ["Hello, Ada.", "Your name is Ada."]
    assert detail.totals.total_cost_usd == cost_of(50, 5) + cost_of(80, 6)
    assert listed == [conversation.id]


async def test_an_agent_is_defined_changed_versioned_and_archived(
    service: Service, tenant: str
) -> None:
    token = service.token(tenant, sub="root", roles=("tenant_admin",))

    def blocking() -> None:
        with OmniForge(service.base_url, token=token) as client:
            created = client.agents.create(
                "support", instructions="Be brief.", tools=["calculator"], temperature=0.2
            )
            changed = client.agents.update("support", instructions="Be very brief.", tools=None)
            unchanged = client.agents.update("support", instructions="Be very brief.")
            versions = list(client.agents.versions("support", page_size=1))
            first = client.agents.get("support", version=1)
            with pytest.raises(AgentExists) as taken:
                client.agents.create("support")
            client.agents.archive("support")
            archived = client.agents.get("support")
            names = [agent.name for agent in client.agents.list()]
            all_names = [agent.name for agent in client.agents.list(archived=True)]
            with pytest.raises(AgentArchived) as refused:
                client.tasks.create("Hello", agent="support")

        assert (created.version, created.latest_version, created.status) == (1, 1, "active")
        assert created.tools == ["calculator"]
        assert created.temperature == 0.2
        assert created.created_by == "root"
        assert (changed.version, changed.instructions, changed.tools) == (2, "Be very brief.", None)
        assert unchanged.version == 2
        assert [v.version for v in versions] == [2, 1]
        assert (first.version, first.latest_version, first.instructions) == (1, 2, "Be brief.")
        assert taken.value.body["agent"] == "support"
        assert archived.status == "archived"
        assert archived.archived_at is not None
        assert names == ["default"]
        assert all_names == ["default", "support"]
        assert refused.value.status == 409

    await asyncio.to_thread(blocking)


async def test_tools_are_listed_with_whether_the_caller_may_use_them(
    service: Service, tenant: str
) -> None:
    async with AsyncOmniForge(service.base_url, token=service.token(tenant)) as member:
        tools = await member.tools.list()
    async with AsyncOmniForge(
        service.base_url, token=service.token(tenant, roles=("viewer",))
    ) as viewer:
        seen = await viewer.tools.list()

    assert sorted(tool.name for tool in tools) == ["calculator", "current_time"]
    assert all(tool.usable for tool in tools)
    calculator = next(tool for tool in tools if tool.name == "calculator")
    assert calculator.parameters["type"] == "object"
    assert not any(tool.usable for tool in seen)


async def test_the_cost_report_sums_the_tenants_calls_exactly(
    service: Service, tenant: str
) -> None:
    service.fake_llm.script(MODEL, Reply.text("ok", prompt_tokens=1000, completion_tokens=333))
    async with AsyncOmniForge(service.base_url, token=service.token(tenant)) as member:
        accepted = await member.tasks.create("Count this")
        await member.tasks.wait(accepted.task_id)
        with pytest.raises(Forbidden) as denied:
            await member.costs.report(tenant)
    admin_token = service.token(tenant, sub="root", roles=("tenant_admin",))
    async with AsyncOmniForge(service.base_url, token=admin_token) as admin:
        report = await admin.costs.report(tenant, group_by="model")
        usage = await admin.costs.usage(tenant)

    expected = cost_of(1000, 333)
    assert denied.value.permission == "cost:view"
    assert report.group_by == "model"
    assert report.currency == "USD"
    assert [(g.key, g.calls, g.cost_usd) for g in report.groups] == [(MODEL, 1, expected)]
    assert report.totals.cost_usd == expected
    assert isinstance(report.totals.cost_usd, Decimal)
    assert report.from_ < report.to
    assert [(m.model, m.input_tokens, m.output_tokens) for m in usage.models] == [
        (MODEL, 1000, 333)
    ]
    assert usage.totals.cost_usd == expected


async def test_who_am_i_tasks_by_agent_and_costs_split_by_agent_and_model(
    service: Service, tenant: str
) -> None:
    service.fake_llm.script(
        MODEL,
        Reply.text("one", prompt_tokens=100, completion_tokens=10),
        Reply.text("two", prompt_tokens=200, completion_tokens=20),
    )
    admin_token = service.token(tenant, sub="root", roles=("tenant_admin",))
    async with AsyncOmniForge(service.base_url, token=admin_token) as admin:
        await admin.agents.create("scribe", instructions="Write.")
        me = await admin.me()
        scribed = await admin.tasks.create("Write", agent="scribe")
        await admin.tasks.wait(scribed.task_id)
        plain = await admin.tasks.create("Plain")
        await admin.tasks.wait(plain.task_id)
        by_agent = [task.id async for task in admin.tasks.list(agent="scribe")]
        report = await admin.costs.report(tenant, group_by="agent", split_by="model", order="cost")

    assert (me.subject, me.tenant.id, me.roles, me.api_key) == (
        "root",
        tenant,
        ["tenant_admin"],
        None,
    )
    assert "api_key:configure" in me.permissions
    assert by_agent == [scribed.task_id]
    assert report.split_by == "model"
    assert report.order == "cost"
    assert [(g.key, g.split, g.cost_usd) for g in report.groups] == [
        ("default", MODEL, cost_of(200, 20)),
        ("scribe", MODEL, cost_of(100, 10)),
    ]
