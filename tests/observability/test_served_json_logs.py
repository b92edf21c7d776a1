"""A real `omniforge serve` with `OMNIFORGE_LOG_FORMAT=json`: every line it writes is a JSON
object, a run's lines carry its tenant, task and chain, a request's lines its request id, and
neither a tenant's secret nor a bearer token is ever written, even where code logs them."""

import json
import signal
from pathlib import Path
from typing import Any

from app.tools.services import MASK
from tests.api.helpers import stream
from tests.cluster import cluster
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL

SECRET = "gh-secret-9c41e7d2f0aa"
REQUEST_ID = "edge-request-5e1f"


async def test_every_served_line_is_json_with_its_ids_and_no_secret(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    async with cluster(
        own_database_url,
        tmp_path,
        fake_llm,
        OMNIFORGE_LOG_FORMAT="json",
        OMNIFORGE_TOOL_MODULES="tests.fakes.logging_tool",
    ) as group:
        instance = await group.instance("json")
        admin_token = group.token_for("root", ("tenant_admin",))
        async with instance.client(admin_token) as admin:
            stored = await admin.put(
                f"/api/v1/tenants/{group.tenant}/secrets/GITHUB_TOKEN", json={"value": SECRET}
            )
            assert stored.status_code in (200, 201), stored.text
        # Careless code logs a secret and the caller's credentials, inside the run.
        fake_llm.script(
            MODEL,
            Reply.tool_calls(
                [
                    ToolCall(
                        "log_note",
                        {"note": f"{SECRET} with Authorization: Bearer {group.token}"},
                    )
                ]
            ),
            Reply.text("noted"),
        )
        async with instance.client(group.token) as client:
            response = await client.post(
                "/api/v1/tasks",
                json={"input": "note it", "tools": ["log_note"]},
                headers={"X-Request-ID": REQUEST_ID},
            )
            assert response.status_code == 202, response.text
            assert response.headers["X-Request-ID"] == REQUEST_ID
            task = response.json()
            events = await stream(client, task["task_id"])
            # A token in a URL, as a misconfigured client sends it, is not logged either.
            await client.get("/api/v1/tasks", params={"access_token": group.token})
        assert events[-1].json["final_state"] == "completed"
        assert await instance.terminate() in (0, -signal.SIGTERM)

    written = instance.log
    assert SECRET not in written
    assert group.token not in written
    assert admin_token not in written
    lines: list[dict[str, Any]] = [json.loads(line) for line in written.splitlines() if line]
    assert all({"timestamp", "level", "logger", "message"} <= set(line) for line in lines)
    assert any("Application startup complete" in line["message"] for line in lines)

    (note,) = [line for line in lines if line["logger"] == "tests.fakes.logging_tool"]
    assert note["tenant_id"] == group.tenant
    assert note["task_id"] == task["task_id"]
    assert note["chain_id"] == task["chain_id"]
    assert "request_id" not in note
    assert note["message"] == f"note from the agent: {MASK} with Authorization: Bearer [credential]"

    access = [line for line in lines if line["logger"] == "uvicorn.access"]
    (submitted,) = [a for a in access if a["http"]["method"] == "POST"]
    assert submitted["request_id"] == REQUEST_ID
    assert submitted["tenant_id"] == group.tenant
    assert submitted["http"]["status"] == 202
    (listed,) = [a for a in access if a["http"]["path"].startswith("/api/v1/tasks?")]
    assert "eyJ" not in listed["http"]["path"]  # masked (LiteLLM's access filter masks too)
    assert all(len(a["request_id"]) > 0 for a in access)
