"""A file's visibility: a new upload is its uploader's alone (`private`) unless shared with the
tenant; another member's API calls and runs find a private file nowhere; only its uploader
and holders of `file:manage` delete or share a file."""

from typing import Any
from uuid import uuid4

import httpx

from tests.api.helpers import assert_invalid, assert_problem, stream, submit
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service

FILES = "/api/v1/files"
FILE_TOOLS = ["list_files", "read_file", "search_files"]
ADMIN = {"sub": "root", "roles": ("tenant_admin",)}


async def _upload(
    client: httpx.AsyncClient, name: str, data: bytes, visibility: str | None = None
) -> dict[str, Any]:
    params = {} if visibility is None else {"visibility": visibility}
    response = await client.post(FILES, params=params, files={"file": (name, data, "text/plain")})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def test_a_private_file_is_seen_by_its_uploader_and_file_managers_only(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as alice:
        private = await _upload(alice, "diary.txt", b"dear diary")
        shared = await _upload(alice, "menu.txt", b"soup on monday", "tenant")
        mine = [item["id"] for item in (await alice.get(FILES)).json()["items"]]
    assert (private["visibility"], shared["visibility"]) == ("private", "tenant")
    assert mine == [shared["id"], private["id"]]
    for roles in [("member",), ("viewer",), ("auditor",)]:
        async with service.client(tenant, sub="bob", roles=roles) as bob:
            listed = [item["id"] for item in (await bob.get(FILES)).json()["items"]]
            assert listed == [shared["id"]], roles
            for path in ["", "/content"]:
                assert_problem(await bob.get(f"{FILES}/{private['id']}{path}"), 404, "not-found")
                assert (await bob.get(f"{FILES}/{shared['id']}{path}")).status_code == 200
    async with service.client(tenant, **ADMIN) as admin:
        listed = [item["id"] for item in (await admin.get(FILES)).json()["items"]]
        content = await admin.get(f"{FILES}/{private['id']}/content")
    assert listed == [shared["id"], private["id"]]
    assert content.content == b"dear diary"


async def test_only_the_uploader_or_a_file_manager_deletes_or_shares_a_file(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as alice:
        private = await _upload(alice, "diary.txt", b"dear diary")
        shared = await _upload(alice, "menu.txt", b"soup", "tenant")
        other = await _upload(alice, "other.txt", b"more", "tenant")
    async with service.client(tenant, sub="bob") as bob:
        # A file bob sees but did not upload: he lacks the right (403, naming it). One he
        # cannot see is as unknown to him as any other id (404): its existence is not his
        # to learn.
        refused = await bob.delete(f"{FILES}/{shared['id']}")
        assert assert_problem(refused, 403, "forbidden")["permission"] == "file:manage"
        refused = await bob.patch(f"{FILES}/{shared['id']}", json={"visibility": "private"})
        assert assert_problem(refused, 403, "forbidden")["permission"] == "file:manage"
        assert_problem(await bob.delete(f"{FILES}/{private['id']}"), 404, "not-found")
        unseen = await bob.patch(f"{FILES}/{private['id']}", json={"visibility": "tenant"})
        assert_problem(unseen, 404, "not-found")
        assert (await bob.get(f"{FILES}/{shared['id']}")).status_code == 200
    async with service.client(tenant) as alice:
        # Its uploader shares it, then deletes another.
        opened = await alice.patch(f"{FILES}/{private['id']}", json={"visibility": "tenant"})
        assert opened.status_code == 200, opened.text
        assert opened.json()["visibility"] == "tenant"
        invalid = await alice.patch(f"{FILES}/{private['id']}", json={"visibility": "public"})
        assert_invalid(invalid, "body.visibility")
        assert (await alice.delete(f"{FILES}/{shared['id']}")).status_code == 204
    async with service.client(tenant, sub="bob") as bob:
        assert (await bob.get(f"{FILES}/{private['id']}/content")).content == b"dear diary"
    async with service.client(tenant, **ADMIN) as admin:
        # A holder of `file:manage` deletes anyone's.
        assert (await admin.delete(f"{FILES}/{other['id']}")).status_code == 204
        audit = await admin.get(f"/api/v1/tenants/{tenant}/audit", params={"action": "file.*"})
    rows = [(r["action"], r["resource_id"], r["actor"]) for r in audit.json()["items"]]
    assert rows[:3] == [
        ("file.delete", other["id"], "root"),
        ("file.delete", shared["id"], "alice"),
        ("file.update", private["id"], "alice"),
    ]
    update = audit.json()["items"][2]["details"]["visibility"]
    assert update == {"before": "private", "after": "tenant"}


async def test_an_upload_names_a_known_visibility(service: Service, tenant: str) -> None:
    async with service.client(tenant) as alice:
        response = await alice.post(
            FILES, params={"visibility": "everyone"}, files={"file": ("a.txt", b"a")}
        )
    assert_invalid(response, "query.visibility")


async def test_another_tenant_finds_no_file_by_the_changed_routes(
    service: Service, tenant: str, other_tenant: str
) -> None:
    async with service.client(tenant) as alice:
        shared = await _upload(alice, "menu.txt", b"soup", "tenant")
    async with service.client(other_tenant, **ADMIN) as outsider:
        path = f"{FILES}/{shared['id']}"
        assert_problem(await outsider.get(path), 404, "not-found")
        assert_problem(await outsider.get(f"{path}/content"), 404, "not-found")
        changed = await outsider.patch(path, json={"visibility": "private"})
        assert_problem(changed, 404, "not-found")
        assert_problem(await outsider.delete(path), 404, "not-found")
        assert (await outsider.get(FILES)).json()["items"] == []
    async with service.client(tenant) as alice:
        assert (await alice.get(f"{FILES}/{shared['id']}")).json()["visibility"] == "tenant"


async def test_a_members_run_cannot_read_another_members_private_file(service: Service) -> None:
    tenant = await service.create_tenant(f"v-{uuid4().hex[:12]}", enabled_tools=FILE_TOOLS)
    async with service.client(tenant) as alice:
        private = await _upload(alice, "diary.txt", b"the zebra secret")
        shared = await _upload(alice, "menu.txt", b"the zebra menu", "tenant")
    async with service.client(tenant, sub="bob") as bob:
        # Named in a task, it is as unknown as a file that never existed.
        named = await bob.post(
            "/api/v1/tasks",
            json={"input": "Read it.", "tools": FILE_TOOLS, "file_ids": [private["id"]]},
        )
        assert_invalid(named, "body.file_ids.0")
        service.fake_llm.script(
            MODEL,
            Reply.tool_calls([ToolCall("list_files", {}, id="c1")]),
            Reply.tool_calls([ToolCall("read_file", {"file_id": private["id"]}, id="c2")]),
            Reply.tool_calls([ToolCall("search_files", {"query": "zebra"}, id="c3")]),
            Reply.tool_calls([ToolCall("read_file", {"file_id": shared["id"]}, id="c4")]),
            Reply.text("Only the menu."),
        )
        accepted = await submit(bob, input="What do the files say?", tools=FILE_TOOLS)
        events = await stream(bob, accepted["task_id"])
        chain = (await bob.get(f"/api/v1/chains/{accepted['chain_id']}")).json()
    assert events[-1].json["final_state"] == "completed"
    listed, read, found, read_shared = (
        step["tool_result"]
        for step in chain["steps"]
        if step["type"] == "tool_result" and step["tool_result"]["tool_type"] == "file_system"
    )
    assert [f["file_id"] for f in listed["result"]["files"]] == [shared["id"]]
    assert (read["success"], read["error_code"]) == (False, "not_found")
    assert [m["file_id"] for m in found["result"]["matches"]] == [shared["id"]]
    assert read_shared["result"]["text"] == "the zebra menu"
    # Another member's file is untrusted content for bob's run, and private data as any file.
    assert read_shared["labels"] == ["private", "untrusted"]
    assert listed["labels"] == ["untrusted"]
    assert "the zebra secret" not in str(chain)
