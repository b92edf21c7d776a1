"""Our agents as A2A v1.0 agents, through the official `a2a-sdk` client over HTTP: the card,
SendMessage (blocking and not), SendStreamingMessage with every status update, GetTask,
ListTasks, CancelTask, SubscribeToTask resumed after a disconnect with no gap and no
duplicate, the usage-and-cost extension on every answer (equal, to the exact Decimal, to the
task as our REST API stores it), approval waits as INPUT_REQUIRED, and tenancy."""

from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError, ClientCallContext
from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from app.tools.a2a.extension import EXTENSION_URI, LAST_EVENT_ID_HEADER
from tests.a2a_helpers import (
    BINDINGS,
    HTTP_JSON,
    JSONRPC,
    a2a_client,
    agent_base,
    bearer,
    event_of,
    fetch_card,
    stored_usage,
    text_message,
    usage,
    usage_fields,
)
from tests.api.helpers import (
    TWO_TOOL_TASK_COST,
    assert_problem,
    configure,
    define_agent,
    script_two_tool_task,
    stream,
)
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service

QUESTION = "What is 17 * 23 + 4, and the time in Tokyo?"
ANSWER = "17 * 23 + 4 = 395."
TWO_TOOLS = ["calculator", "current_time"]
AGENT = "clock-calc"


async def _rest_task(service: Service, tenant: str, task_id: str) -> dict[str, Any]:
    async with service.client(tenant) as client:
        response = await client.get(f"/api/v1/tasks/{task_id}")
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()
    return task


async def _finished(service: Service, tenant: str, task_id: str) -> dict[str, Any]:
    """The task once its run has ended (its REST stream read to `done`)."""
    async with service.client(tenant) as client:
        await stream(client, task_id)
    return await _rest_task(service, tenant, task_id)


def _text(parts: Any) -> str:
    return "".join(part.text for part in parts)


async def test_the_card_describes_the_agent_its_interfaces_extension_skills_and_scheme(
    service: Service, tenant: str
) -> None:
    await define_agent(
        service, tenant, AGENT, tools=TWO_TOOLS, description="Calculates and tells the time."
    )
    base = agent_base(service.base_url, tenant, AGENT)
    async with bearer(service.token(tenant, roles=("viewer",))) as http:
        card = await fetch_card(http, base)

    assert card.name == AGENT
    assert card.description == "Calculates and tells the time."
    assert card.version == "1"
    assert {(i.protocol_binding, i.url, i.protocol_version) for i in card.supported_interfaces} == {
        (JSONRPC, base, "1.0"),
        (HTTP_JSON, base, "1.0"),
    }
    assert card.capabilities.streaming is True
    assert [extension.uri for extension in card.capabilities.extensions] == [EXTENSION_URI]
    assert sorted(skill.name for skill in card.skills) == TWO_TOOLS
    assert all(skill.description for skill in card.skills)
    [(name, scheme)] = card.security_schemes.items()
    assert scheme.http_auth_security_scheme.scheme == "Bearer"
    assert [list(requirement.schemes) for requirement in card.security_requirements] == [[name]]


async def test_the_built_in_agent_is_served_and_an_unknown_or_archived_one_is_not(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "old")
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        assert (await admin.delete("/api/v1/agents/old")).status_code in (200, 204)
        builtin = await admin.get(
            f"/a2a/v1/tenants/{tenant}/agents/default/.well-known/agent-card.json"
        )
        unknown = await admin.get(
            f"/a2a/v1/tenants/{tenant}/agents/nobody/.well-known/agent-card.json"
        )
        archived = await admin.get(
            f"/a2a/v1/tenants/{tenant}/agents/old/.well-known/agent-card.json"
        )

    assert builtin.status_code == 200, builtin.text
    assert builtin.json()["name"] == "default"
    assert_problem(unknown, 404, "not-found")
    assert_problem(archived, 404, "not-found")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_blocking_send_answers_with_the_completed_task_its_answer_and_usage(
    service: Service, tenant: str, binding: str
) -> None:
    await define_agent(service, tenant, AGENT, tools=TWO_TOOLS)
    script_two_tool_task(service.fake_llm)
    base = agent_base(service.base_url, tenant, AGENT)
    async with bearer(service.token(tenant)) as http:
        client = await a2a_client(http, base, binding, streaming=False)
        [response] = [
            r
            async for r in client.send_message(
                a2a.SendMessageRequest(message=text_message(QUESTION))
            )
        ]
    task = response.task
    stored = await _rest_task(service, tenant, task.id)

    assert task.status.state == a2a.TASK_STATE_COMPLETED
    assert _text(task.status.message.parts) == ANSWER
    [artifact] = task.artifacts
    assert _text(artifact.parts) == ANSWER
    assert task.context_id == stored["conversation_id"]
    assert stored["status"] == "completed"
    assert stored["agent"] == {"name": AGENT, "version": 1}
    assert usage_fields(usage(task)) == stored_usage(stored)
    assert usage(task).cost_usd == TWO_TOOL_TASK_COST
    assert [_text(message.parts) for message in task.history] == [QUESTION, ANSWER]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_context_id_makes_the_message_the_next_turn_of_its_conversation(
    service: Service, tenant: str, binding: str
) -> None:
    service.fake_llm.script(MODEL, Reply.text("Hello Ada."), Reply.text("You are Ada."))
    base = agent_base(service.base_url, tenant, "default")
    async with bearer(service.token(tenant)) as http:
        client = await a2a_client(http, base, binding, streaming=False)
        [first] = [
            r
            async for r in client.send_message(
                a2a.SendMessageRequest(message=text_message("I am Ada."))
            )
        ]
        context = first.task.context_id
        again = text_message("Who am I?", context_id=context)
        [second] = [r async for r in client.send_message(a2a.SendMessageRequest(message=again))]
    async with service.client(tenant) as rest:
        conversation = (await rest.get(f"/api/v1/conversations/{context}")).json()

    assert second.task.context_id == context
    assert second.task.id != first.task.id
    assert _text(second.task.status.message.parts) == "You are Ada."
    assert [turn["task_id"] for turn in conversation["turns"]] == [first.task.id, second.task.id]
    # The second call saw the first turn.
    assert "I am Ada." in str(service.fake_llm.requests[-1].body["messages"])


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_non_blocking_send_answers_at_once_and_get_task_reads_the_end(
    service: Service, tenant: str, binding: str
) -> None:
    await define_agent(service, tenant, AGENT, tools=TWO_TOOLS)
    script_two_tool_task(service.fake_llm, answer_delay_s=0.3)
    base = agent_base(service.base_url, tenant, AGENT)
    async with bearer(service.token(tenant)) as http:
        client = await a2a_client(http, base, binding, streaming=False)
        request = a2a.SendMessageRequest(
            message=text_message(QUESTION),
            configuration=a2a.SendMessageConfiguration(return_immediately=True),
        )
        [response] = [r async for r in client.send_message(request)]
        started = response.task
        stored = await _finished(service, tenant, started.id)
        done = await client.get_task(a2a.GetTaskRequest(id=started.id))

    assert started.status.state in (a2a.TASK_STATE_SUBMITTED, a2a.TASK_STATE_WORKING)
    assert started.artifacts == []
    assert done.status.state == a2a.TASK_STATE_COMPLETED
    assert _text(done.artifacts[0].parts) == ANSWER
    assert usage_fields(usage(done)) == stored_usage(stored)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_streaming_send_sends_every_status_update_the_answer_and_the_usage(
    service: Service, tenant: str, binding: str
) -> None:
    await define_agent(service, tenant, AGENT, tools=TWO_TOOLS)
    script_two_tool_task(service.fake_llm)
    base = agent_base(service.base_url, tenant, AGENT)
    async with bearer(service.token(tenant)) as http:
        client = await a2a_client(http, base, binding)
        events = [
            event_of(r)
            async for r in client.send_message(
                a2a.SendMessageRequest(message=text_message(QUESTION))
            )
        ]
    first, updates = events[0], events[1:]
    stored = await _rest_task(service, tenant, first.id)

    assert isinstance(first, a2a.Task)
    assert first.status.state in (a2a.TASK_STATE_SUBMITTED, a2a.TASK_STATE_WORKING)
    kinds = [
        ("artifact", _text(e.artifact.parts))
        if isinstance(e, a2a.TaskArtifactUpdateEvent)
        else ("status", a2a.TaskState.Name(e.status.state))
        for e in updates
    ]
    assert kinds == [
        ("status", "TASK_STATE_WORKING"),
        ("artifact", ANSWER),
        ("status", "TASK_STATE_COMPLETED"),
    ]
    assert _text(updates[-1].status.message.parts) == ANSWER
    assert all(e.task_id == first.id and e.context_id == first.context_id for e in updates)
    # Every event carries the extension: its stream position, and the usage so far.
    # Every event carries the extension: the id of the stream event it came from (what
    # SubscribeToTask resumes after), and the usage so far.
    async with service.client(tenant) as rest:
        ours = {e.event: e.id for e in await stream(rest, first.id)}
    ids = [usage(e).event_id for e in updates]
    assert ids == [ours["task_status"], ours["chain_completed"], ours["done"]]
    assert usage_fields(usage(updates[-1])) == stored_usage(stored)
    assert usage(updates[0]).llm_calls == 0


async def test_subscribe_resumes_after_a_disconnect_with_no_gap_and_no_duplicate(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, AGENT, tools=TWO_TOOLS)
    script_two_tool_task(service.fake_llm, answer_delay_s=0.5)
    base = agent_base(service.base_url, tenant, AGENT)
    async with bearer(service.token(tenant)) as http:
        client = await a2a_client(http, base, JSONRPC)
        seen: list[Any] = []
        async for response in client.send_message(
            a2a.SendMessageRequest(message=text_message(QUESTION))
        ):
            seen.append(event_of(response))
            if isinstance(seen[-1], a2a.TaskStatusUpdateEvent):
                break  # the connection drops right after the first status update
        task_id = seen[0].id
        last = usage(seen[-1]).event_id
        assert last is not None
        resumed_context = ClientCallContext(service_parameters={LAST_EVENT_ID_HEADER: str(last)})
        resumed = [
            event_of(r)
            async for r in client.subscribe(
                a2a.SubscribeToTaskRequest(id=task_id), context=resumed_context
            )
        ]
        # The whole stream again, for reference: from before its first event.
        everything = [
            event_of(r)
            async for r in client.subscribe(
                a2a.SubscribeToTaskRequest(id=task_id),
                context=ClientCallContext(service_parameters={LAST_EVENT_ID_HEADER: "0"}),
            )
        ]
        rest = await a2a_client(http, base, HTTP_JSON)
        over_rest = [
            event_of(r)
            async for r in rest.subscribe(
                a2a.SubscribeToTaskRequest(id=task_id), context=resumed_context
            )
        ]
    stored = await _rest_task(service, tenant, task_id)

    assert [usage(e).event_id for e in everything[: len(seen) - 1]] == [
        usage(e).event_id for e in seen[1:]
    ]
    assert everything[len(seen) - 1 :] == resumed  # exactly the rest, each as it was
    assert over_rest == resumed
    assert all((usage(e).event_id or 0) > last for e in resumed)
    assert isinstance(resumed[-1], a2a.TaskStatusUpdateEvent)
    assert resumed[-1].status.state == a2a.TASK_STATE_COMPLETED
    assert usage_fields(usage(resumed[-1])) == stored_usage(stored)


async def test_an_approval_wait_is_input_required_and_cancel_ends_it(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "approvals", {"tools": {"calculator": "always"}})
    service.fake_llm.script(
        MODEL, Reply.tool_calls([ToolCall("calculator", {"expression": "6 * 7"})])
    )
    base = agent_base(service.base_url, tenant, "default")
    async with bearer(service.token(tenant)) as http:
        client = await a2a_client(http, base, JSONRPC, streaming=False)
        [response] = [
            r
            async for r in client.send_message(
                a2a.SendMessageRequest(message=text_message("6 * 7?"))
            )
        ]
        waiting = response.task
        cancelled = await client.cancel_task(a2a.CancelTaskRequest(id=waiting.id))
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(a2a.CancelTaskRequest(id=waiting.id))
    stored = await _rest_task(service, tenant, waiting.id)

    assert waiting.status.state == a2a.TASK_STATE_INPUT_REQUIRED
    assert f"/api/v1/tasks/{waiting.id}/approvals/" in _text(waiting.status.message.parts)
    assert cancelled.status.state == a2a.TASK_STATE_CANCELED
    assert stored["status"] == "cancelled"
    assert usage_fields(usage(cancelled)) == stored_usage(stored)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_list_tasks_pages_the_agents_tasks_newest_first_and_filters_them(
    service: Service, tenant: str, binding: str
) -> None:
    service.fake_llm.always(MODEL, Reply.text("Done."))
    base = agent_base(service.base_url, tenant, "default")
    async with bearer(service.token(tenant)) as http:
        client = await a2a_client(http, base, binding, streaming=False)
        sent = []
        for text in ("one", "two", "three"):
            [r] = [
                x
                async for x in client.send_message(
                    a2a.SendMessageRequest(message=text_message(text))
                )
            ]
            sent.append(r.task)
        first = await client.list_tasks(a2a.ListTasksRequest(page_size=2))
        second = await client.list_tasks(
            a2a.ListTasksRequest(page_size=2, page_token=first.next_page_token)
        )
        of_context = await client.list_tasks(a2a.ListTasksRequest(context_id=sent[1].context_id))
        failed = await client.list_tasks(a2a.ListTasksRequest(status=a2a.TASK_STATE_FAILED))
        completed = await client.list_tasks(a2a.ListTasksRequest(status=a2a.TASK_STATE_COMPLETED))

    newest_first = [task.id for task in reversed(sent)]
    assert [t.id for t in first.tasks] + [t.id for t in second.tasks] == newest_first
    assert first.total_size == 3
    assert first.page_size == 2
    assert second.next_page_token == ""
    assert [t.id for t in of_context.tasks] == [sent[1].id]
    assert list(failed.tasks) == []
    assert [t.id for t in completed.tasks] == newest_first
    assert all(usage(t).llm_calls == 1 for t in completed.tasks)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_another_tenants_task_is_not_found(
    service: Service, tenant: str, other_tenant: str, binding: str
) -> None:
    service.fake_llm.always(MODEL, Reply.text("Done."))
    async with bearer(service.token(other_tenant)) as theirs_http:
        theirs = await a2a_client(
            theirs_http,
            agent_base(service.base_url, other_tenant, "default"),
            binding,
            streaming=False,
        )
        [r] = [
            x async for x in theirs.send_message(a2a.SendMessageRequest(message=text_message("hi")))
        ]
    their_task = r.task.id
    async with bearer(service.token(tenant, roles=("tenant_admin",))) as http:
        mine = await a2a_client(http, agent_base(service.base_url, tenant, "default"), binding)
        with pytest.raises(TaskNotFoundError):
            await mine.get_task(a2a.GetTaskRequest(id=their_task))
        with pytest.raises(TaskNotFoundError):
            await mine.cancel_task(a2a.CancelTaskRequest(id=their_task))
        with pytest.raises(TaskNotFoundError):
            async for _ in mine.subscribe(a2a.SubscribeToTaskRequest(id=their_task)):
                pass
        listed = await mine.list_tasks(a2a.ListTasksRequest())
        # Naming their tenant in the path: not found before anything A2A.
        path = f"/a2a/v1/tenants/{other_tenant}/agents/default"
        card = await http.get(f"{service.base_url}{path}/.well-known/agent-card.json")
        got = await http.get(f"{service.base_url}{path}/tasks/{their_task}")

    assert list(listed.tasks) == []
    assert_problem(card, 404, "not-found")
    assert_problem(got, 404, "not-found")
    assert their_task not in got.text


async def test_no_token_is_401_on_the_card_and_both_bindings(service: Service, tenant: str) -> None:
    base = agent_base(service.base_url, tenant, "default")
    async with httpx.AsyncClient(timeout=30) as anonymous:
        card = await anonymous.get(f"{base}/.well-known/agent-card.json")
        rpc = await anonymous.post(
            base, json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        )
        rest = await anonymous.get(f"{base}/tasks")
        with pytest.raises(A2AClientError, match="401"):
            await fetch_card(anonymous, base)

    for response in (card, rpc, rest):
        assert_problem(response, 401, "unauthorized")
        assert response.headers["WWW-Authenticate"].startswith("Bearer")


async def test_what_a_message_cannot_be_is_a_clear_a2a_error(service: Service, tenant: str) -> None:
    base = agent_base(service.base_url, tenant, "default")
    async with bearer(service.token(tenant)) as http:
        client = await a2a_client(http, base, JSONRPC, streaming=False)

        async def send(message: a2a.Message) -> None:
            async for _ in client.send_message(a2a.SendMessageRequest(message=message)):
                pass

        with pytest.raises(ContentTypeNotSupportedError):
            await send(
                a2a.Message(
                    message_id="m-file",
                    role=a2a.ROLE_USER,
                    parts=[a2a.Part(url="https://example.com/a.pdf")],
                )
            )
        with pytest.raises(UnsupportedOperationError, match="approvals"):
            await send(text_message("more", task_id="0d2c1c8e-54fd-4d0c-9f7e-3a2a4c1f7c11"))
        with pytest.raises(InvalidParamsError):
            await send(text_message("hi", context_id="4b0f3c52-5a55-4c5e-a3b3-2bd5a6f3e2f1"))
        with pytest.raises(InvalidParamsError):
            await send(text_message("hi", context_id="not-a-conversation"))


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_delegating_agents_a2a_task_streams_its_own_states_with_its_familys_usage(
    service: Service, tenant: str, binding: str
) -> None:
    await define_agent(service, tenant, "helper", tools=[])
    await define_agent(service, tenant, "lead", tools=["agent:helper"])
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("agent__helper", {"task": "Help."})]),
        Reply.text("the helper's answer"),
        Reply.text("The lead's answer."),
    )
    base = agent_base(service.base_url, tenant, "lead")
    async with bearer(service.token(tenant)) as http:
        client = await a2a_client(http, base, binding)
        events = [
            event_of(r)
            async for r in client.send_message(a2a.SendMessageRequest(message=text_message("Go.")))
        ]
    first, updates = events[0], events[1:]
    stored = await _rest_task(service, tenant, first.id)

    # the sub-agent's task is not an A2A task: none of its states or answers show here
    kinds = [
        ("artifact", _text(e.artifact.parts))
        if isinstance(e, a2a.TaskArtifactUpdateEvent)
        else ("status", a2a.TaskState.Name(e.status.state))
        for e in updates
    ]
    assert kinds == [
        ("status", "TASK_STATE_WORKING"),
        ("artifact", "The lead's answer."),
        ("status", "TASK_STATE_COMPLETED"),
    ]
    assert {e.task_id for e in updates} == {first.id}
    # its usage is the family's: the lead's two calls and the helper's one
    assert usage(updates[-1]).llm_calls == 3
    assert usage_fields(usage(updates[-1])) == stored_usage(stored)
