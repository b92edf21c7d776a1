"""The todo_* tools keep a task's plan through the run's todo list (rows in the database, on
both backends): added, listed by status, completed, deleted; another task's id is not_found;
without a service behind the run they fail clearly."""

from typing import Any
from uuid import UUID, uuid4

from app.chain import ErrorCode, ReasoningChain
from app.resources.todos import TodoLists
from app.storage import Database
from app.storage.runs import RunStores
from app.tools.builtin.todos import todo_tools
from app.tools.executor import ToolExecutor
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult
from app.tools.services import ToolServices
from tests.api.helpers import configure, stream, submit
from tests.factories import context_for, stored_task
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service


class _Run:
    """One task's run: its chain, and calls through the executor with its todo list."""

    def __init__(self, lists: TodoLists | None, tenant: str, task_id: UUID) -> None:
        self.chain = ReasoningChain(task_id=str(task_id), agent_id="a")
        todos = None if lists is None else lists.for_task(tenant, task_id)
        self.context = context_for(self.chain, tenant_id=tenant, services=ToolServices(todos=todos))
        self.executor = ToolExecutor(ToolRegistry(todo_tools()))

    async def call(self, name: str, **arguments: Any) -> ToolResult:
        return await self.executor.execute(self.chain, self.context, name, arguments)

    async def value(self, name: str, **arguments: Any) -> Any:
        result = await self.call(name, **arguments)
        assert result.success, result.error
        return result.value


async def _run(database: Database, tenant: str | None = None) -> _Run:
    tenant = tenant or f"tt-{uuid4().hex[:8]}"
    task_id, _ = await stored_task(RunStores.of(database).queue, tenant)
    return _Run(TodoLists(database), tenant, task_id)


async def test_a_plan_is_added_listed_completed_and_deleted(database: Database) -> None:
    run = await _run(database)

    draft = await run.value("todo_add", text="Draft the summary")
    review = await run.value("todo_add", text="Review the numbers")
    publish = await run.value("todo_add", text="Publish")
    await run.value("todo_complete", id=draft["id"])
    deleted = await run.value("todo_delete", id=review["id"])
    everything = await run.value("todo_list")
    still_open = await run.value("todo_list", status="open")
    done = await run.value("todo_list", status="done")

    assert draft["text"] == "Draft the summary"
    assert draft["done"] is False
    assert deleted == {"id": review["id"], "deleted": True}
    assert [(t["text"], t["done"]) for t in everything["items"]] == [
        ("Draft the summary", True),
        ("Publish", False),
    ]
    assert (everything["open"], everything["done"]) == (1, 1)
    assert [t["id"] for t in still_open["items"]] == [publish["id"]]
    assert [t["id"] for t in done["items"]] == [draft["id"]]


async def test_the_steps_summarise_each_call(database: Database) -> None:
    run = await _run(database)

    added = await run.call("todo_add", text="Write tests")
    listed = await run.call("todo_list")

    assert added.result_step.visibility.summary == f"added todo {added.value['id']}: Write tests"
    assert listed.result_step.visibility.summary == "1 open, 0 done"


async def test_another_tasks_todo_is_not_found(database: Database) -> None:
    tenant = f"tt-{uuid4().hex[:8]}"
    mine, other = await _run(database, tenant), await _run(database, tenant)
    todo = await mine.value("todo_add", text="mine")

    completed = await other.call("todo_complete", id=todo["id"])
    deleted = await other.call("todo_delete", id=todo["id"])

    for result in (completed, deleted):
        assert not result.success
        assert result.error_code is ErrorCode.NOT_FOUND
        assert result.error == f"this task has no todo {todo['id']} (todo_list shows its todos)"
    assert [t["done"] for t in (await mine.value("todo_list"))["items"]] == [False]


async def test_bad_ids_and_empty_text_are_invalid_arguments(database: Database) -> None:
    run = await _run(database)

    results = [
        await run.call("todo_add", text=""),
        await run.call("todo_complete", id=0),
        await run.call("todo_delete", id=2**63),
        await run.call("todo_list", status="later"),
    ]

    assert [r.error_code for r in results] == [ErrorCode.INVALID_ARGUMENTS] * 4


async def test_without_a_service_the_tools_fail_clearly() -> None:
    run = _Run(None, "tenant", uuid4())

    result = await run.call("todo_add", text="nowhere to keep it")

    assert not result.success
    assert result.error_code is ErrorCode.TOOL_ERROR
    assert result.error == "todo lists are not available here (no service behind this run)"


async def test_a_task_keeps_its_plan_in_the_database(service: Service, tenant: str) -> None:
    await configure(service, tenant, "tools", {"enabled_tools": ["todo_add", "todo_list"]})
    service.fake_llm.script(
        MODEL,
        # One call per turn: calls of one turn run concurrently, in no set order.
        Reply.tool_calls([ToolCall("todo_add", {"text": "Gather the figures"}, id="a1")]),
        Reply.tool_calls([ToolCall("todo_add", {"text": "Write the summary"}, id="a2")]),
        Reply.tool_calls([ToolCall("todo_list", {}, id="l1")]),
        Reply.text("Planned."),
    )
    async with service.client(tenant) as client:
        accepted = await submit(client, input="Plan the report.")
        events = await stream(client, accepted["task_id"])

    results = [
        e.json["step"]["tool_result"]
        for e in events
        if e.event == "reasoning_step" and e.json["step"]["type"] == "tool_result"
    ]
    listed = [
        r["result"] for r in results if isinstance(r["result"], dict) and "open" in r["result"]
    ]
    assert [item["text"] for item in listed[0]["items"]] == [
        "Gather the figures",
        "Write the summary",
    ]
    task_id = UUID(accepted["task_id"])
    stored = await TodoLists(service.state.database).for_task(tenant, task_id).items()
    assert [(t.text, t.done) for t in stored] == [
        ("Gather the figures", False),
        ("Write the summary", False),
    ]
    assert events[-1].json["final_state"] == "completed"
