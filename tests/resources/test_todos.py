"""Tasks' todo lists are rows scoped by tenant and task: another task's or tenant's todo is not
found, and a list outlives the process (a new `TodoLists` over the same database sees it)."""

from datetime import UTC, datetime
from uuid import UUID, uuid4

import pytest

from app.chain import ErrorCode
from app.resources.todos import TodoLists
from app.storage import Database
from app.storage.runs import RunStores
from app.tools.errors import ToolError
from tests.factories import stored_task

MOMENT = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)


async def _task(database: Database, tenant: str) -> UUID:
    task_id, _ = await stored_task(RunStores.of(database).queue, tenant)
    return task_id


def _tenant() -> str:
    return f"todo-{uuid4().hex[:8]}"


async def test_items_are_added_completed_and_deleted_in_order(database: Database) -> None:
    tenant = _tenant()
    todos = TodoLists(database, clock=lambda: MOMENT).for_task(
        tenant, await _task(database, tenant)
    )

    first = await todos.add("outline the report")
    second = await todos.add("check the figures")
    third = await todos.add("send it")
    done = await todos.complete(second.id)
    await todos.delete(first.id)

    assert (first.text, first.done, first.created_at) == ("outline the report", False, MOMENT)
    assert first.id < second.id < third.id
    assert (done.id, done.done) == (second.id, True)
    assert [(t.id, t.text, t.done) for t in await todos.items()] == [
        (second.id, "check the figures", True),
        (third.id, "send it", False),
    ]


async def test_a_list_survives_a_restart(own_database_url: str) -> None:
    database_url = own_database_url
    tenant = _tenant()
    before = Database(database_url)
    try:
        task_id = await _task(before, tenant)
        added = await TodoLists(before).for_task(tenant, task_id).add("survive the restart")
    finally:
        await before.dispose()

    after = Database(database_url)  # a new process: new engine, new lists
    try:
        items = await TodoLists(after).for_task(tenant, task_id).items()
    finally:
        await after.dispose()

    assert [(t.id, t.text, t.done) for t in items] == [(added.id, "survive the restart", False)]


async def test_another_tasks_or_tenants_todo_is_not_found(database: Database) -> None:
    tenant, other_tenant = _tenant(), _tenant()
    lists = TodoLists(database)
    my_task = await _task(database, tenant)
    mine = lists.for_task(tenant, my_task)
    sibling = lists.for_task(tenant, await _task(database, tenant))
    theirs = lists.for_task(other_tenant, await _task(database, other_tenant))
    # The right task under the wrong tenant finds nothing either.
    impostor = lists.for_task(other_tenant, my_task)
    todo = await mine.add("mine only")

    for stranger in (sibling, theirs, impostor):
        for attempt in (stranger.complete(todo.id), stranger.delete(todo.id)):
            with pytest.raises(ToolError) as caught:
                await attempt
            assert caught.value.error_code is ErrorCode.NOT_FOUND
            assert str(caught.value) == (
                f"this task has no todo {todo.id} (todo_list shows its todos)"
            )
        assert await stranger.items() == []
    assert [(t.text, t.done) for t in await mine.items()] == [("mine only", False)]


async def test_completing_twice_keeps_it_done_and_deleting_twice_is_not_found(
    database: Database,
) -> None:
    tenant = _tenant()
    todos = TodoLists(database).for_task(tenant, await _task(database, tenant))
    todo = await todos.add("once")

    again = [await todos.complete(todo.id), await todos.complete(todo.id)]
    await todos.delete(todo.id)

    assert [t.done for t in again] == [True, True]
    with pytest.raises(ToolError) as caught:
        await todos.delete(todo.id)
    assert caught.value.error_code is ErrorCode.NOT_FOUND


async def test_a_list_is_capped(database: Database) -> None:
    tenant = _tenant()
    todos = TodoLists(database, max_items=2).for_task(tenant, await _task(database, tenant))
    await todos.add("one")
    await todos.add("two")

    with pytest.raises(ToolError) as caught:
        await todos.add("three")

    assert str(caught.value) == (
        "this task's list already holds 2 todos; complete or delete some before adding more"
    )
    assert [t.text for t in await todos.items()] == ["one", "two"]


async def test_text_a_database_refuses_is_stored_as_its_stand_in(database: Database) -> None:
    tenant = _tenant()
    todos = TodoLists(database).for_task(tenant, await _task(database, tenant))

    todo = await todos.add("nul\x00 and lone \ud800 surrogate")

    expected = "nul\u2400 and lone \ufffd surrogate"
    assert todo.text == expected
    assert [t.text for t in await todos.items()] == [expected]
