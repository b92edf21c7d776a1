"""/api/v1/files: uploads sniffed and capped, listed, read, downloaded safely and deleted,
audited, within the caller's tenant only."""

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest

from tests.api.helpers import (
    assert_invalid,
    assert_no_internals,
    assert_problem,
    stream,
    submit,
)
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.resources.documents import make_image, make_pdf
from tests.service import MODEL, Service, running_service, service_settings

FILES = "/api/v1/files"


async def _upload(
    client: httpx.AsyncClient, name: str, data: bytes, content_type: str = "text/plain"
) -> dict[str, Any]:
    response = await client.post(FILES, files={"file": (name, data, content_type)})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def test_an_upload_is_described_by_what_its_bytes_are(service: Service, tenant: str) -> None:
    async with service.client(tenant) as client:
        # The client calls a PNG an HTML page: its bytes decide.
        image = await _upload(client, "page.html", make_image(32, 16), "text/html")
        pdf = await _upload(client, "paper.pdf", make_pdf(["one", "two", "three"]), "image/png")
        text = await _upload(client, "../notes.txt", "h\u00e9llo\n".encode())
        blob = await _upload(client, "data.bin", bytes(range(256)), "text/plain")
    assert (image["media_type"], image["width"], image["height"]) == ("image/png", 32, 16)
    assert image["text_chars"] is None
    assert (pdf["media_type"], pdf["pages"], pdf["text_chars"]) == ("application/pdf", 3, 11)
    assert (text["media_type"], text["name"], text["size_bytes"]) == ("text/plain", "notes.txt", 7)
    assert text["created_by"] == "alice"
    assert blob["media_type"] == "application/octet-stream"
    assert set(image) == {
        "id",
        "name",
        "media_type",
        "size_bytes",
        "sha256",
        "pages",
        "width",
        "height",
        "text_chars",
        "created_by",
        "created_at",
        "visibility",
    }
    assert image["visibility"] == "private"


async def test_files_are_listed_newest_first_and_read_back(service: Service, tenant: str) -> None:
    async with service.client(tenant) as client:
        uploaded = [await _upload(client, f"f{n}.txt", f"file {n}".encode()) for n in range(3)]
        first = (await client.get(FILES, params={"limit": 2})).json()
        rest = (await client.get(FILES, params={"limit": 2, "cursor": first["next_cursor"]})).json()
        one = await client.get(f"{FILES}/{uploaded[1]['id']}")
    names = [item["name"] for item in first["items"] + rest["items"]]
    assert names == ["f2.txt", "f1.txt", "f0.txt"]
    assert rest["next_cursor"] is None
    assert one.status_code == 200
    assert one.json() == uploaded[1]


async def test_content_comes_back_as_an_attachment_of_its_sniffed_type(
    service: Service, tenant: str
) -> None:
    data = make_image(10, 10)
    async with service.client(tenant) as client:
        image = await _upload(client, "r\u00e9sum\u00e9; x.html", data, "text/html")
        text = await _upload(client, "a.txt", b"plain words")
        got = await client.get(f"{FILES}/{image['id']}/content")
        got_text = await client.get(f"{FILES}/{text['id']}/content")
    assert got.status_code == 200
    assert got.content == data
    assert got.headers["content-type"] == "image/png"
    assert got.headers["x-content-type-options"] == "nosniff"
    disposition = got.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="r_sum__ x.html"')
    assert "filename*=UTF-8''r%C3%A9sum%C3%A9%3B%20x.html" in disposition
    assert "sandbox" in got.headers["content-security-policy"]
    assert got_text.headers["content-type"] == "text/plain; charset=utf-8"
    assert got_text.content == b"plain words"


async def test_a_delete_removes_the_file_and_both_are_audited(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as client:
        created = await _upload(client, "gone.txt", b"bye")
        deleted = await client.delete(f"{FILES}/{created['id']}")
        again = await client.delete(f"{FILES}/{created['id']}")
        after = await client.get(f"{FILES}/{created['id']}")
        content = await client.get(f"{FILES}/{created['id']}/content")
    assert deleted.status_code == 204
    assert_problem(again, 404, "not-found")
    assert_problem(after, 404, "not-found")
    assert_problem(content, 404, "not-found")
    async with service.client(tenant, sub="eve", roles=("auditor",)) as auditor:
        response = await auditor.get(f"/api/v1/tenants/{tenant}/audit", params={"action": "file.*"})
    events = [(e["action"], e["resource_id"], e["actor"]) for e in response.json()["items"]]
    assert events == [
        ("file.delete", created["id"], "alice"),
        ("file.upload", created["id"], "alice"),
    ]


async def test_another_tenants_file_is_not_found_by_any_route(
    service: Service, tenant: str, other_tenant: str
) -> None:
    async with service.client(tenant) as owner:
        created = await _upload(owner, "mine.txt", b"private")
    path = f"{FILES}/{created['id']}"
    async with service.client(other_tenant, roles=("tenant_admin",)) as other:
        responses = [
            await other.get(path),
            await other.get(f"{path}/content"),
            await other.delete(path),
        ]
        listed = await other.get(FILES)
    for response in responses:
        body = assert_problem(response, 404, "not-found")
        assert "private" not in response.text
        assert created["id"] in body["detail"]
    assert listed.json()["items"] == []
    async with service.client(tenant) as owner:
        assert (await owner.get(path)).status_code == 200


async def test_reading_needs_file_read_and_changing_needs_file_write(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as member:
        shared = await member.post(
            FILES, params={"visibility": "tenant"}, files={"file": ("a.txt", b"words")}
        )
        created = shared.json()
    async with service.client(tenant, sub="vic", roles=("viewer",)) as viewer:
        assert (await viewer.get(FILES)).status_code == 200
        assert (await viewer.get(f"{FILES}/{created['id']}/content")).status_code == 200
        refused = [
            await viewer.post(FILES, files={"file": ("b.txt", b"more")}),
            await viewer.delete(f"{FILES}/{created['id']}"),
        ]
    for response in refused:
        body = assert_problem(response, 403, "forbidden")
        assert body["permission"] == "file:write"
    async with service.client() as anonymous:
        assert_problem(await anonymous.get(FILES), 401, "unauthorized")
        assert_problem(
            await anonymous.post(FILES, files={"file": ("b.txt", b"x")}), 401, "unauthorized"
        )


async def test_an_upload_may_be_larger_than_other_request_bodies(
    service: Service, tenant: str
) -> None:
    data = ("0123456789abcdef" * 1024 + "\n").encode() * 200  # 3.2 MB of text
    assert len(data) > service.settings.max_body_bytes
    async with service.client(tenant) as client:
        created = await _upload(client, "big.txt", data)
        content = await client.get(f"{FILES}/{created['id']}/content")
    assert created["size_bytes"] == len(data)
    assert created["text_chars"] == len(data)
    assert content.content == data


@pytest.mark.parametrize(
    ("request_options", "field"),
    [
        ({"json": {"file": "not multipart"}}, "body"),
        ({"content": b"raw bytes", "headers": {"content-type": "text/plain"}}, "body"),
        ({"files": {"other": ("a.txt", b"x")}}, "body.file"),
        ({"data": {"file": "a field, not a file"}, "files": {"x": ("a", b"")}}, "body.file"),
        (
            {
                "content": b'--b\r\nContent-Disposition: form-data; name="file"; '
                b'filename="a.txt"\r\n\r\ncut short',
                "headers": {"content-type": "multipart/form-data; boundary=b"},
            },
            "body",
        ),
        (
            {
                "content": b"garbage before any boundary",
                "headers": {"content-type": "multipart/form-data; boundary=b"},
            },
            "body",
        ),
    ],
)
async def test_a_body_without_exactly_one_file_part_is_refused(
    service: Service, tenant: str, request_options: dict[str, Any], field: str
) -> None:
    async with service.client(tenant) as client:
        response = await client.post(FILES, **request_options)
    assert_invalid(response, field)


async def test_two_file_parts_are_refused(service: Service, tenant: str) -> None:
    async with service.client(tenant) as client:
        response = await client.post(
            FILES, files=[("file", ("a.txt", b"a")), ("file", ("b.txt", b"b"))]
        )
    assert_invalid(response, "body.file")


@pytest.mark.parametrize("file_id", ["not-a-uuid", "1234"])
async def test_an_id_that_is_no_uuid_is_invalid(
    service: Service, tenant: str, file_id: str
) -> None:
    async with service.client(tenant) as client:
        response = await client.get(f"{FILES}/{file_id}")
    assert_invalid(response, "path.file_id")
    assert_no_internals(response)


# A service with a small cap.

SMALL_CAP = 4096


@pytest.fixture(scope="module")
async def capped(
    database_url: str, shared_fake_llm: FakeLLMServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Service]:
    directory = tmp_path_factory.mktemp("capped")
    settings = service_settings(
        directory,
        database_url,
        shared_fake_llm,
        file_max_bytes=SMALL_CAP,
        files_dir=Path(directory) / "files",
    )
    async with running_service(settings, shared_fake_llm) as service:
        yield service


async def test_a_file_at_the_cap_is_stored_in_the_configured_directory(capped: Service) -> None:
    tenant = await capped.create_tenant(f"c-{uuid4().hex[:12]}")
    data = b"x" * SMALL_CAP
    async with capped.client(tenant) as client:
        created = await _upload(client, "full.txt", data)
        content = await client.get(f"{FILES}/{created['id']}/content")
    assert content.content == data
    files_dir = capped.settings.files_dir
    assert files_dir is not None
    stored = files_dir / created["id"].replace("-", "")[:2] / created["id"].replace("-", "")
    assert stored.read_bytes() == data


@pytest.mark.parametrize("size", [SMALL_CAP + 1, SMALL_CAP * 100])
async def test_a_file_past_the_cap_is_refused_with_413(capped: Service, size: int) -> None:
    tenant = await capped.create_tenant(f"c-{uuid4().hex[:12]}")
    async with capped.client(tenant) as client:
        response = await client.post(FILES, files={"file": ("big.txt", b"y" * size)})
        listed = await client.get(FILES)
    body = assert_problem(response, 413, "payload-too-large")
    assert str(SMALL_CAP) in body["detail"]
    assert listed.json()["items"] == []


async def test_a_streamed_upload_past_the_cap_is_refused_as_it_arrives(capped: Service) -> None:
    tenant = await capped.create_tenant(f"c-{uuid4().hex[:12]}")

    async def body() -> AsyncIterator[bytes]:
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="s.txt"\r\n\r\n'
        for _ in range(1000):  # far past the cap, without a Content-Length
            yield b"z" * 1024
        yield b"\r\n--b--\r\n"

    async with capped.client(tenant) as client:
        response = await client.post(
            FILES, content=body(), headers={"content-type": "multipart/form-data; boundary=b"}
        )
    assert_problem(response, 413, "payload-too-large")


# Files in a task: given with `file_ids`, read and searched by the agent's tools.

FILE_TOOLS = ["list_files", "read_file", "search_files"]


def _results(chain: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        step["tool_result"]
        for step in chain["steps"]
        if step["tool_result"] and not step["tool_result"]["model"]
    ]


async def test_an_agent_reads_and_searches_the_files_given_to_its_task(
    service: Service,
) -> None:
    tenant = await service.create_tenant(f"f-{uuid4().hex[:12]}", enabled_tools=FILE_TOOLS)
    async with service.client(tenant) as client:
        pdf = await _upload(
            client, "falcons.pdf", make_pdf(["cover", "The falcon section: falcon facts."])
        )
        await _upload(client, "note.txt", b"A falcon was seen once.")
        service.fake_llm.script(
            MODEL,
            Reply.tool_calls([ToolCall("list_files", {}, id="c1")]),
            Reply.tool_calls(
                [ToolCall("read_file", {"file_id": pdf["id"], "pages": "2"}, id="c2")]
            ),
            Reply.tool_calls([ToolCall("search_files", {"query": "falcon"}, id="c3")]),
            Reply.text("Falcons are covered on page 2."),
        )
        accepted = await submit(
            client,
            input="What do my files say about falcons?",
            tools=FILE_TOOLS,
            file_ids=[pdf["id"]],
        )
        events = await stream(client, accepted["task_id"])
        chain = (await client.get(f"/api/v1/chains/{accepted['chain_id']}")).json()
    assert events[-1].json["final_state"] == "completed"
    listed, read, found = (result["result"] for result in _results(chain))
    assert [(f["name"], f["attached"]) for f in listed["files"]] == [
        ("falcons.pdf", True),
        ("note.txt", False),
    ]
    assert read["text"] == "[page 2]\nThe falcon section: falcon facts."
    assert [m["name"] for m in found["matches"]] == ["falcons.pdf", "note.txt"]
    # The model was told of the file given to the task.
    first = service.fake_llm.requests_for(MODEL)[0].body
    assert pdf["id"] in json.dumps(first)


async def test_an_agent_finds_no_file_of_another_tenant(
    service: Service, other_tenant: str
) -> None:
    tenant = await service.create_tenant(f"f-{uuid4().hex[:12]}", enabled_tools=FILE_TOOLS)
    async with service.client(other_tenant) as other:
        theirs = await _upload(other, "theirs.txt", b"their private zebra notes")
    async with service.client(tenant) as client:
        refused = await client.post(
            "/api/v1/tasks", json={"input": "Read it.", "file_ids": [theirs["id"]]}
        )
        service.fake_llm.script(
            MODEL,
            Reply.tool_calls([ToolCall("read_file", {"file_id": theirs["id"]}, id="c1")]),
            Reply.tool_calls([ToolCall("search_files", {"query": "zebra"}, id="c2")]),
            Reply.text("I cannot find it."),
        )
        accepted = await submit(client, input="Read their file.", tools=FILE_TOOLS)
        events = await stream(client, accepted["task_id"])
        chain = (await client.get(f"/api/v1/chains/{accepted['chain_id']}")).json()
    assert_invalid(refused, "body.file_ids")
    assert events[-1].json["final_state"] == "completed"
    read, found = _results(chain)
    assert (read["success"], read["error_code"]) == (False, "not_found")
    assert found["result"]["matches"] == []
    assert "private zebra notes" not in json.dumps(chain)
