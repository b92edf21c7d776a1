"""The sandbox tools through the running service, in real sandboxes: an agent writes a CSV
into its conversation's workspace, analyses it with pandas and draws a chart, which the model
is shown; the conversation's next turn finds the same files and variables; a run that names
no sandbox tool is never offered one; another conversation, or another tenant, sees nothing
of the workspace."""

import json
from typing import Any
from uuid import uuid4

import httpx
from sqlalchemy import select

from app.agents.images import IMAGE_NOT_SHOWN
from app.storage.tables import workspace_snapshots
from tests.api.helpers import configure, define_agent, result_of, stream, submit
from tests.api.tools import BUILTIN_TOOLS
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service

SANDBOX = ["run_code", "run_shell", "workspace_files"]
CSV = "city,sales\nParis,10\nRome,7\nOslo,3\n"
ANALYSE = (
    "import pandas as pd\n"
    "import matplotlib.pyplot as plt\n"
    "sales = pd.read_csv('sales.csv')\n"
    "print('rows', len(sales))\n"
    "sales.plot.bar(x='city', y='sales')\n"
    "total = int(sales['sales'].sum())\n"
    "total"
)


async def _conversation(client: httpx.AsyncClient, agent: str) -> str:
    response = await client.post("/api/v1/conversations", json={"agent": agent})
    assert response.status_code == 201, response.text
    conversation: str = response.json()["id"]
    return conversation


async def _turn(client: httpx.AsyncClient, conversation: str, text: str) -> dict[str, Any]:
    """The turn's stored chain, with the progress its stream showed (`progress`)."""
    accepted = await submit(client, input=text, conversation_id=conversation)
    events = await stream(client, accepted["task_id"])
    assert events[-1].json["final_state"] == "completed", events[-2].json
    chain: dict[str, Any] = (await client.get(f"/api/v1/tasks/{accepted['task_id']}/chain")).json()
    chain["progress"] = [e.json["message"] for e in events if e.event == "tool_progress"]
    return chain


async def test_an_agent_analyses_a_csv_draws_a_chart_and_its_next_turn_finds_them(
    service: Service, tenant: str, other_tenant: str
) -> None:
    fake = service.fake_llm
    for each in (tenant, other_tenant):
        await configure(service, each, "tools", {"enabled_tools": [*BUILTIN_TOOLS, *SANDBOX]})
        await define_agent(service, each, "analyst", tools=["run_code", "workspace_files"])
    fake.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("workspace_files", {"action": "write", "path": "sales.csv", "content": CSV})]
        ),
        Reply.tool_calls([ToolCall("run_code", {"code": ANALYSE})]),
        Reply.text("Sales total 20; chart drawn."),
        # The next turn: the variable and the files are still there.
        Reply.tool_calls([ToolCall("run_code", {"code": "total * 2"})]),
        Reply.tool_calls([ToolCall("workspace_files", {"action": "list"})]),
        Reply.text("40."),
        # Another conversation, and another tenant's: a workspace of their own.
        Reply.tool_calls([ToolCall("workspace_files", {"action": "list"})]),
        Reply.text("Nothing here."),
        Reply.tool_calls([ToolCall("workspace_files", {"action": "list"})]),
        Reply.text("Nothing here either."),
    )
    async with service.client(tenant) as client:
        conversation = await _conversation(client, "analyst")
        first = await _turn(client, conversation, "Chart the sales.")
        second = await _turn(client, conversation, "Double it.")
        elsewhere = await _turn(client, await _conversation(client, "analyst"), "Any files?")
    async with service.client(other_tenant) as outsider:
        theirs = await _turn(outsider, await _conversation(outsider, "analyst"), "Any files?")

    analysed = result_of(first, "run_code")
    assert analysed["success"], analysed
    assert analysed["result"]["stdout"] == "rows 3\n"
    assert "".join(first["progress"]).replace("stdout: ", "") == "rows 3\n"
    assert analysed["result"]["value_repr"] == "20"
    assert analysed["result"]["figures"] == ["figure-1.png"]
    assert [f["path"] for f in analysed["result"]["files"]["created"]] == ["figure-1.png"]
    # The chart went along with the result: this model takes no images, and is told so.
    after_chart = json.dumps(fake.requests_for(MODEL)[2].body["messages"])
    assert IMAGE_NOT_SHOWN in after_chart
    doubled = result_of(second, "run_code")["result"]
    assert doubled["value_repr"] == "40"
    assert "note" not in doubled  # the same Python session: nothing was restarted
    listed = result_of(second, "workspace_files")["result"]["files"]
    assert sorted(f["path"] for f in listed) == ["figure-1.png", "sales.csv"]
    assert result_of(elsewhere, "workspace_files")["result"]["files"] == []
    assert result_of(theirs, "workspace_files")["result"]["files"] == []
    fake.verify()


async def test_a_run_that_names_no_sandbox_tool_is_never_offered_one(service: Service) -> None:
    # A tenant that enabled every tool (none listed), the sandbox tools among them.
    tenant = await service.create_tenant(f"all-{uuid4().hex[:12]}", enabled_tools=None)
    fake = service.fake_llm
    fake.script(MODEL, Reply.text("Hello."))
    fake.script(MODEL, Reply.tool_calls([ToolCall("run_code", {"code": "1"})]), Reply.text("no"))
    async with service.client(tenant) as client:
        plain = await submit(client, input="Hi")
        await stream(client, plain["task_id"])
        asked = await submit(client, input="Run it")  # the model asks for it all the same
        await stream(client, asked["task_id"])
        chain = (await client.get(f"/api/v1/tasks/{asked['task_id']}/chain")).json()

    offered = [t["function"]["name"] for t in fake.requests_for(MODEL)[0].body.get("tools", [])]
    assert offered
    assert not {"run_code", "run_shell", "workspace_files"} & set(offered)
    refused = result_of(chain, "run_code")
    assert not refused["success"]
    assert refused["error_code"] == "unknown_tool"
    fake.verify()


async def _snapshots(service: Service, tenant: str) -> list[Any]:
    w = workspace_snapshots.c
    async with service.state.database.read() as connection:
        rows = await connection.execute(
            select(w.conversation_id, w.task_id, w.size_bytes).where(w.tenant_id == tenant)
        )
        return list(rows.all())


async def test_a_workspace_snapshot_goes_with_its_conversation_or_its_task(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    await configure(service, tenant, "tools", {"enabled_tools": [*BUILTIN_TOOLS, *SANDBOX]})
    write = ToolCall("workspace_files", {"action": "write", "path": "a.txt", "content": "a"})
    fake.script(
        MODEL,
        Reply.tool_calls([write]),
        Reply.text("Written."),
        Reply.tool_calls([write]),
        Reply.text("Written."),
    )
    await define_agent(service, tenant, "writer", tools=["workspace_files"])
    async with service.client(tenant) as client:
        conversation = await _conversation(client, "writer")
        await _turn(client, conversation, "Write it.")
        alone = await submit(client, input="Write it.", tools=["workspace_files"])
        await stream(client, alone["task_id"])
        kept = await _snapshots(service, tenant)
        async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
            for path in (f"conversations/{conversation}", f"tasks/{alone['task_id']}"):
                erased = await admin.delete(f"/api/v1/{path}")
                assert erased.status_code == 204, erased.text
        left = await _snapshots(service, tenant)

    assert sorted((str(r.conversation_id), str(r.task_id)) for r in kept) == sorted(
        [(conversation, "None"), ("None", alone["task_id"])]
    )
    assert all(r.size_bytes > 0 for r in kept)
    assert left == []
    fake.verify()
