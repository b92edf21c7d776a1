"""Agent definitions: versioned per tenant, immutable once stored, archived rather than
deleted; a task runs the exact version it names, within what its agent allows."""

import asyncio
from typing import Any
from uuid import uuid4

import httpx
import pytest

from tests.api.helpers import (
    assert_invalid,
    assert_no_internals,
    assert_problem,
    configure,
    stream,
    submit,
)
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service

ADMIN = ("tenant_admin",)
ORDER_SCHEMA = {
    "type": "object",
    "properties": {"total": {"type": "number"}},
    "required": ["total"],
}


def _admin(service: Service, tenant: str) -> httpx.AsyncClient:
    return service.client(tenant, sub="root", roles=ADMIN)


async def _define(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post("/api/v1/agents", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def _patch(client: httpx.AsyncClient, name: str, **changes: Any) -> dict[str, Any]:
    response = await client.patch(f"/api/v1/agents/{name}", json=changes)
    assert response.status_code == 200, response.text
    patched: dict[str, Any] = response.json()
    return patched


async def _run(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    """Submits a task, reads its stream to the end and returns the task as stored."""
    accepted = await submit(client, **body)
    await stream(client, accepted["task_id"])
    task: dict[str, Any] = (await client.get(f"/api/v1/tasks/{accepted['task_id']}")).json()
    return task


def _system_prompts(service: Service) -> list[str]:
    """The system message of each request the model received, in order."""
    return [
        request.body["messages"][0]["content"]
        for request in service.fake_llm.requests_for(MODEL)
        if request.body["messages"][0]["role"] == "system"
    ]


async def test_an_admin_defines_an_agent_that_reads_back_whole(
    service: Service, tenant: str
) -> None:
    definition = {
        "description": "Adds up orders.",
        "instructions": "You add up orders. Answer with the total.",
        "model": MODEL,
        "tools": ["calculator"],
        "temperature": 0.2,
        "max_iterations": 4,
        "max_output_tokens": 300,
        "response_format": ORDER_SCHEMA,
        "budget": {"max_llm_calls": 5},
        "on_limit": "answer",
        "metadata": {"team": "billing"},
    }
    async with _admin(service, tenant) as admin:
        created = await _define(admin, name="adder", **definition)
        read = await admin.get("/api/v1/agents/adder")
        again = await admin.post("/api/v1/agents", json={"name": "adder"})
        reserved = await admin.post("/api/v1/agents", json={"name": "default"})

    budget = created.pop("budget")
    assert {name: created[name] for name in definition if name != "budget"} == {
        name: value for name, value in definition.items() if name != "budget"
    }
    assert {limit: value for limit, value in budget.items() if value is not None} == {
        "max_llm_calls": 5
    }
    assert created["name"] == "adder"
    assert (created["version"], created["latest_version"]) == (1, 1)
    assert created["status"] == "active"
    assert created["builtin"] is False
    assert created["kind"] == "react"
    assert created["created_by"] == created["version_created_by"] == "root"
    assert created["created_at"] == created["version_created_at"]
    assert created["archived_at"] is None
    assert read.json() == {**created, "budget": budget}
    assert_problem(again, 409, "agent-exists")
    assert "built-in" in assert_problem(reserved, 409, "agent-exists")["detail"]


async def test_the_list_shows_the_builtin_agent_first_then_the_agents_by_name(
    service: Service, tenant: str
) -> None:
    async with _admin(service, tenant) as admin:
        for name in ("zeta", "alpha", "mid"):
            await _define(admin, name=name)
        await admin.delete("/api/v1/agents/mid")
        listed = (await admin.get("/api/v1/agents")).json()
        with_archived = (await admin.get("/api/v1/agents", params={"archived": "true"})).json()
        pages: list[list[str]] = []
        cursor = None
        while True:
            params = {"limit": 1, **({"cursor": cursor} if cursor else {})}
            page = (await admin.get("/api/v1/agents", params=params)).json()
            pages.append([item["name"] for item in page["items"]])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        bad_cursor = await admin.get("/api/v1/agents", params={"cursor": "bm90IGEgbmFtZQ"})

    assert [(a["name"], a["builtin"]) for a in listed["items"]] == [
        ("default", True),
        ("alpha", False),
        ("zeta", False),
    ]
    assert listed["next_cursor"] is None
    assert [(a["name"], a["status"]) for a in with_archived["items"]] == [
        ("default", "active"),
        ("alpha", "active"),
        ("mid", "archived"),
        ("zeta", "active"),
    ]
    # "alpha" sorts before "default": the page after the built-in one starts from the top.
    assert pages == [["default"], ["alpha"], ["zeta"]]
    assert_invalid(bad_cursor, "query.cursor")


async def test_a_patch_makes_the_next_version_and_every_version_stays_readable(
    service: Service, tenant: str
) -> None:
    async with _admin(service, tenant) as admin:
        await _define(admin, name="helper", instructions="Be brief.", temperature=0.5)
        v2 = await _patch(admin, "helper", instructions="Be thorough.")
        same = await _patch(admin, "helper", instructions="Be thorough.", temperature=0.5)
        v3 = await _patch(admin, "helper", temperature=None, tools=["current_time"])
        versions = (await admin.get("/api/v1/agents/helper/versions")).json()
        first_page = (await admin.get("/api/v1/agents/helper/versions?limit=2")).json()
        second_page = (
            await admin.get(
                "/api/v1/agents/helper/versions",
                params={"limit": 2, "cursor": first_page["next_cursor"]},
            )
        ).json()
        v1 = (await admin.get("/api/v1/agents/helper/versions/1")).json()
        newest = (await admin.get("/api/v1/agents/helper")).json()
        missing = await admin.get("/api/v1/agents/helper/versions/4")
        invalid = await admin.patch("/api/v1/agents/helper", json={"temperature": 7})
        unknown_field = await admin.patch("/api/v1/agents/helper", json={"name": "other"})

    assert (v2["version"], v2["latest_version"]) == (2, 2)
    assert (v2["instructions"], v2["temperature"]) == ("Be thorough.", 0.5)
    assert same == v2  # nothing changed: no version 3 then
    assert (v3["version"], v3["temperature"], v3["tools"]) == (3, None, ["current_time"])
    assert v3["instructions"] == "Be thorough."
    assert [v["version"] for v in versions["items"]] == [3, 2, 1]
    assert {v["latest_version"] for v in versions["items"]} == {3}
    assert [v["version"] for v in first_page["items"] + second_page["items"]] == [3, 2, 1]
    assert second_page["next_cursor"] is None
    assert (v1["version"], v1["latest_version"]) == (1, 3)
    assert (v1["instructions"], v1["temperature"], v1["tools"]) == ("Be brief.", 0.5, None)
    assert newest == v3
    assert_problem(missing, 404, "not-found")
    assert_invalid(invalid, "body.temperature")
    assert_invalid(unknown_field, "body.name")


async def test_a_task_runs_the_version_it_names_and_records_it(
    service: Service, tenant: str
) -> None:
    service.fake_llm.script(MODEL, Reply.text("One."), Reply.text("Two."))
    async with _admin(service, tenant) as admin:
        await _define(admin, name="scribe", instructions="Version one speaking.")
        await _patch(admin, "scribe", instructions="Version two speaking.")
    async with service.client(tenant) as member:
        pinned = await _run(member, agent="scribe@1")
        newest = await _run(member, agent="scribe")
        chains = [
            (await member.get(f"/api/v1/chains/{task['chain_id']}")).json()
            for task in (pinned, newest)
        ]

    assert _system_prompts(service) == ["Version one speaking.", "Version two speaking."]
    assert (pinned["status"], pinned["answer"]) == ("completed", "One.")
    assert pinned["agent"] == {"name": "scribe", "version": 1}
    assert newest["agent"] == {"name": "scribe", "version": 2}
    assert [chain["agent_id"] for chain in chains] == ["scribe@1", "scribe@2"]


async def test_the_task_list_filters_by_agent_across_its_versions(
    service: Service, tenant: str, other_tenant: str
) -> None:
    service.fake_llm.script(MODEL, *[Reply.text(str(n)) for n in range(5)])
    async with _admin(service, tenant) as admin:
        await _define(admin, name="scribe", instructions="Write.")
        await _define(admin, name="critic", instructions="Judge.")
    async with _admin(service, other_tenant) as other:
        await _define(other, name="scribe", instructions="Someone else's.")
    async with service.client(tenant) as member:
        first = await _run(member, agent="scribe")
        await _run(member, agent="critic")
        await _run(member)  # the built-in default agent
    async with _admin(service, tenant) as admin:
        await _patch(admin, "scribe", instructions="Write better.")
    async with service.client(tenant) as member:
        second = await _run(member, agent="scribe")
        listed = await member.get("/api/v1/tasks", params={"agent": "scribe"})
        paged = await member.get("/api/v1/tasks", params={"agent": "scribe", "limit": 1})
        bad = await member.get("/api/v1/tasks", params={"agent": "Not A Name"})
    async with service.client(other_tenant) as stranger:
        theirs = await _run(stranger, agent="scribe")
        foreign = await stranger.get("/api/v1/tasks", params={"agent": "scribe"})

    assert [task["id"] for task in listed.json()["items"]] == [second["id"], first["id"]]
    assert [task["agent"]["version"] for task in listed.json()["items"]] == [2, 1]
    assert [task["id"] for task in paged.json()["items"]] == [second["id"]]
    assert paged.json()["next_cursor"] is not None
    assert [task["id"] for task in foreign.json()["items"]] == [theirs["id"]]
    assert_invalid(bad, "query.agent")


async def test_a_callers_system_message_follows_the_agents_instructions(
    service: Service, tenant: str
) -> None:
    service.fake_llm.script(MODEL, Reply.text("Bonjour."))
    async with _admin(service, tenant) as admin:
        await _define(admin, name="greeter", instructions="You greet people.", tools=[])
    messages = [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Hello!"},
    ]
    async with service.client(tenant) as member:
        task = await _run(member, input=None, messages=messages, agent="greeter")

    assert task["answer"] == "Bonjour."
    assert task["result"] == task["answer"]  # the old name, deprecated, for one release
    assert service.fake_llm.requests_for(MODEL)[-1].body["messages"] == [
        {"role": "system", "content": "You greet people."},
        *messages,
    ]


async def test_an_archived_agent_runs_no_new_task_while_its_past_tasks_still_read(
    service: Service, tenant: str
) -> None:
    service.fake_llm.script(MODEL, Reply.text("Done."))
    async with _admin(service, tenant) as admin:
        await _define(admin, name="retiring")
        old = await _run(admin, agent="retiring")
        archived = await admin.delete("/api/v1/agents/retiring")
        refused = await admin.post("/api/v1/tasks", json={"input": "hi", "agent": "retiring@1"})
        old_again = await admin.get(f"/api/v1/tasks/{old['id']}")
        read = (await admin.get("/api/v1/agents/retiring")).json()
        version = await admin.get("/api/v1/agents/retiring/versions/1")
        patch = await admin.patch("/api/v1/agents/retiring", json={"description": "back"})
        archived_again = await admin.delete("/api/v1/agents/retiring")
        recreate = await admin.post("/api/v1/agents", json={"name": "retiring"})
        listed = (await admin.get("/api/v1/agents")).json()

    assert archived.status_code == 204
    assert archived.content == b""
    assert_problem(refused, 409, "agent-archived")
    assert old_again.status_code == 200
    assert old_again.json()["agent"] == {"name": "retiring", "version": 1}
    assert old_again.json()["answer"] == "Done."
    assert read["status"] == "archived"
    assert read["archived_at"] is not None
    assert version.status_code == 200
    assert_problem(patch, 409, "agent-archived")
    assert archived_again.status_code == 204  # already archived: nothing changes
    assert_problem(recreate, 409, "agent-exists")  # the name stays taken
    assert "retiring" not in [item["name"] for item in listed["items"]]


async def test_the_builtin_agent_reads_but_never_changes(service: Service, tenant: str) -> None:
    async with _admin(service, tenant) as admin:
        read = await admin.get("/api/v1/agents/default")
        v1 = await admin.get("/api/v1/agents/default/versions/1")
        v2 = await admin.get("/api/v1/agents/default/versions/2")
        versions = await admin.get("/api/v1/agents/default/versions")
        patch = await admin.patch("/api/v1/agents/default", json={"temperature": 1})
        archive = await admin.delete("/api/v1/agents/default")

    assert read.status_code == 200
    builtin = read.json()
    assert (builtin["name"], builtin["version"], builtin["builtin"]) == ("default", 1, True)
    assert builtin["status"] == "active"
    assert builtin["created_by"] is None
    assert v1.json() == builtin
    assert_problem(v2, 404, "not-found")
    assert versions.json() == {"items": [builtin], "next_cursor": None}
    for refused in (patch, archive):
        assert "built-in" in assert_problem(refused, 409, "agent-builtin")["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "no-such-model"}, "body.model"),
        ({"tools": ["calculator", "vault_store"]}, "body.tools.1"),  # registered, not enabled
        ({"tools": ["no_such_tool"]}, "body.tools.0"),
        ({"tools": ["llm"]}, "body.tools.0"),
        ({"tools": ["calculator", "calculator"]}, "body.tools.1"),
        ({"kind": "planner"}, "body.kind"),
        ({"kind": "Not A Kind"}, "body.kind"),
        ({"response_format": {"type": "objekt"}}, "body.response_format"),
        ({"response_format": {"$schema": "https://example.com/nope"}}, "body.response_format"),
        (
            {
                "response_format": {
                    "$schema": "http://json-schema.org/draft-04/schema#",
                    "exclusiveMinimum": 3,  # a number only from draft 6 on
                }
            },
            "body.response_format",
        ),
        ({"temperature": 3}, "body.temperature"),
        ({"budget": {"max_llm_calls": 0}}, "body.budget.max_llm_calls"),
        ({"on_limit": "explode"}, "body.on_limit"),
        ({"name": "Not a slug"}, "body.name"),
        ({"instructions": "nul \u0000 byte"}, "body.instructions"),
        ({"unexpected": 1}, "body.unexpected"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
async def test_a_definition_the_tenant_cannot_run_is_refused_naming_the_field(
    service: Service, tenant: str, body: dict[str, Any], field: str
) -> None:
    async with _admin(service, tenant) as admin:
        created = await admin.post("/api/v1/agents", json={"name": "broken", **body})
        await _define(admin, name="sound")
        patched = await admin.patch(
            "/api/v1/agents/sound", json={k: v for k, v in body.items() if k != "name"}
        )
        stored = await admin.get("/api/v1/agents/broken")
        versions = (await admin.get("/api/v1/agents/sound/versions")).json()

    assert_invalid(created, field)
    if "name" not in body:
        assert_invalid(patched, field)
    assert_problem(stored, 404, "not-found")
    assert [v["version"] for v in versions["items"]] == [1]


async def test_a_model_the_tenant_did_not_approve_is_refused(service: Service, tenant: str) -> None:
    await configure(service, tenant, "models", {"approved": []})
    async with _admin(service, tenant) as admin:
        response = await admin.post("/api/v1/agents", json={"name": "costly", "model": MODEL})

    body = assert_invalid(response, "body.model")
    assert "not approved" in body["errors"][0]["message"]


async def test_a_task_is_held_to_what_its_agent_allows(service: Service, tenant: str) -> None:
    async with _admin(service, tenant) as admin:
        await _define(admin, name="narrow", tools=["calculator"], budget={"max_llm_calls": 3})
    async with service.client(tenant) as member:
        unknown = await member.post("/api/v1/tasks", json={"input": "hi", "agent": "nobody"})
        unknown_version = await member.post(
            "/api/v1/tasks", json={"input": "hi", "agent": "narrow@9"}
        )
        tool = await member.post(
            "/api/v1/tasks", json={"input": "hi", "agent": "narrow", "tools": ["current_time"]}
        )
        budget = await member.post(
            "/api/v1/tasks",
            json={"input": "hi", "agent": "narrow", "budget": {"max_llm_calls": 10}},
        )
        tasks = (await member.get("/api/v1/tasks")).json()

    assert_invalid(unknown, "body.agent")
    assert_invalid(unknown_version, "body.agent")
    assert_invalid(tool, "body.tools.0")
    assert_invalid(budget, "body.budget.max_llm_calls")
    assert tasks["items"] == []


async def test_members_read_and_use_agents_but_only_admins_change_them(
    service: Service, tenant: str
) -> None:
    service.fake_llm.script(MODEL, Reply.text("Hello."))
    async with _admin(service, tenant) as admin:
        await _define(admin, name="greeter", instructions="Greet.")
    outcomes: dict[str, dict[str, int]] = {}
    for role in ("member", "viewer", "auditor"):
        async with service.client(tenant, sub=f"{role}-user", roles=(role,)) as client:
            outcomes[role] = {
                "list": (await client.get("/api/v1/agents")).status_code,
                "read": (await client.get("/api/v1/agents/greeter")).status_code,
                "versions": (await client.get("/api/v1/agents/greeter/versions")).status_code,
                "create": (await client.post("/api/v1/agents", json={"name": "x"})).status_code,
                "patch": (
                    await client.patch("/api/v1/agents/greeter", json={"description": "d"})
                ).status_code,
                "archive": (await client.delete("/api/v1/agents/greeter")).status_code,
            }
            run = await client.post("/api/v1/tasks", json={"input": "hi", "agent": "greeter"})
            outcomes[role]["run"] = run.status_code
            if run.status_code == 202:
                await stream(client, run.json()["task_id"])
            refusal = await client.post("/api/v1/agents", json={"name": "x"})
            assert assert_problem(refusal, 403, "forbidden")["permission"] == "agent:configure"

    reads = {"list": 200, "read": 200, "versions": 200}
    writes = {"create": 403, "patch": 403, "archive": 403}
    assert outcomes == {
        "member": reads | writes | {"run": 202},
        "viewer": reads | writes | {"run": 403},
        "auditor": reads | writes | {"run": 403},
    }


async def test_every_change_is_audited_with_the_definition_before_and_after(
    service: Service, tenant: str
) -> None:
    async with _admin(service, tenant) as admin:
        await _define(admin, name="audited", instructions="Be brief.", temperature=0.5)
        await _patch(admin, "audited", instructions="Be thorough.", temperature=None)
        await _patch(admin, "audited", instructions="Be thorough.")  # no change: no event
        await admin.delete("/api/v1/agents/audited")
        await admin.delete("/api/v1/agents/audited")  # already archived: no event
    async with service.client(tenant, sub="eve", roles=("auditor",)) as auditor:
        response = await auditor.get(
            f"/api/v1/tenants/{tenant}/audit", params={"resource_type": "agent"}
        )

    events = list(reversed(response.json()["items"]))
    assert [(e["action"], e["actor"], e["resource_id"]) for e in events] == [
        ("agent.create", "root", "audited"),
        ("agent.update", "root", "audited"),
        ("agent.archive", "root", "audited"),
    ]
    create, update, archive = (event["details"] for event in events)
    assert create["before"] is None
    assert create["after"] == {
        "version": 1,
        "definition": {"instructions": "Be brief.", "temperature": 0.5},
    }
    assert update["before"] == {
        "version": 1,
        "definition": {"instructions": "Be brief.", "temperature": 0.5},
    }
    assert update["after"] == {
        "version": 2,
        "definition": {"instructions": "Be thorough.", "temperature": None},
    }
    assert archive["before"] == {"status": "active"}
    assert archive["after"]["status"] == "archived"
    assert archive["after"]["archived_at"]


AGENT_ROUTES = [
    ("GET", "/api/v1/agents/{name}", None),
    ("PATCH", "/api/v1/agents/{name}", {"description": "mine now"}),
    ("DELETE", "/api/v1/agents/{name}", None),
    ("GET", "/api/v1/agents/{name}/versions", None),
    ("GET", "/api/v1/agents/{name}/versions/1", None),
]


async def test_another_tenants_agent_is_not_found_on_every_route(
    service: Service, tenant: str, other_tenant: str
) -> None:
    secret = f"Their secret prompt {uuid4().hex}"
    async with _admin(service, other_tenant) as theirs:
        await _define(theirs, name="private", instructions=secret)
    async with _admin(service, tenant) as admin:
        responses = [
            await admin.request(method, template.format(name="private"), json=body)
            for method, template, body in AGENT_ROUTES
        ]
        listed = await admin.get("/api/v1/agents", params={"archived": "true"})
        task = await admin.post("/api/v1/tasks", json={"input": "hi", "agent": "private"})
    async with _admin(service, other_tenant) as theirs:
        still = (await theirs.get("/api/v1/agents/private")).json()

    for response in responses:
        assert_problem(response, 404, "not-found")
        assert secret not in response.text
    assert [item["name"] for item in listed.json()["items"]] == ["default"]
    assert_invalid(task, "body.agent")
    assert (still["version"], still["status"], still["instructions"]) == (1, "active", secret)


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/api/v1/agents/default/versions/0", {}, "path.version"),
        ("/api/v1/agents/default/versions/2147483648", {}, "path.version"),
        ("/api/v1/agents/default/versions/one", {}, "path.version"),
        ("/api/v1/agents/default/versions", {"cursor": "OTk5OTk5OTk5OTk5"}, "query.cursor"),
        ("/api/v1/agents/default/versions", {"cursor": "not-a-cursor!"}, "query.cursor"),
        ("/api/v1/agents", {"limit": "0"}, "query.limit"),
        ("/api/v1/agents", {"archived": "maybe"}, "query.archived"),
    ],
)
async def test_a_bad_path_or_query_is_a_validation_problem(
    service: Service, tenant: str, path: str, params: dict[str, str], field: str
) -> None:
    async with service.client(tenant) as client:
        response = await client.get(path, params=params)
    assert_invalid(response, field)


async def test_a_name_no_agent_can_have_is_simply_not_found(service: Service, tenant: str) -> None:
    async with _admin(service, tenant) as admin:
        responses = [
            await admin.get(f"/api/v1/agents/{'x' * 300}"),
            await admin.get("/api/v1/agents/UPPER%20case/versions"),
            await admin.delete(f"/api/v1/agents/{'y' * 300}"),
        ]
    for response in responses:
        assert_no_internals(response)
        assert_problem(response, 404, "not-found")


async def test_concurrent_changes_each_make_their_own_version_and_one_create_wins(
    service: Service, tenant: str
) -> None:
    async with _admin(service, tenant) as admin:
        created = await asyncio.gather(
            *(admin.post("/api/v1/agents", json={"name": "raced"}) for _ in range(4))
        )
        patched = await asyncio.gather(
            *(_patch(admin, "raced", description=f"take {n}") for n in range(5))
        )
        versions = (await admin.get("/api/v1/agents/raced/versions")).json()["items"]

    statuses = sorted(response.status_code for response in created)
    assert statuses == [201, 409, 409, 409]
    for response in created:
        if response.status_code == 409:
            assert_problem(response, 409, "agent-exists")
    assert sorted(agent["version"] for agent in patched) == [2, 3, 4, 5, 6]
    assert [v["version"] for v in versions] == [6, 5, 4, 3, 2, 1]
    assert {v["description"] for v in versions[:5]} == {f"take {n}" for n in range(5)}
