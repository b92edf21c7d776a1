"""What each reader sees of one chain: full, summary and hidden steps by tool and role, and a
sensitive argument that reaches no restricted reader, over SSE and REST alike."""

import base64
import json
from typing import Any

import httpx
import pytest

from tests.api.helpers import configure, stream, submit, tool_message
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service
from tests.sse import SSE, collect

SECRET = "hunter2-S3CRET-9f4c"
TOOLS = ["calculator", "current_time", "vault_store"]
POLICY = {
    "tools": {"current_time": "summary", "calculator": "hidden"},
    "roles": {
        "member": {"tools": {"calculator": "full"}},
        "viewer": {"tool_types": {"llm": "summary"}},
    },
}
# The form each role gets each tool's steps in (auditors read everything as it is).
VIEWS = {
    "member": {
        "llm": "full",
        "vault_store": "full",
        "calculator": "full",
        "current_time": "summary",
    },
    "viewer": {"llm": "summary", "vault_store": "full", "current_time": "summary"},
    "auditor": {"llm": "full", "vault_store": "full", "calculator": "full", "current_time": "full"},
}
STEP_KEYS = {"id", "step_number", "type", "timestamp", "parent_step_id", "visibility"}


def _script(service: Service) -> None:
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("vault_store", {"name": "db", "password": SECRET}, id="v1")],
            prompt_tokens=50,
            completion_tokens=10,
        ),
        Reply.tool_calls([ToolCall("calculator", {"expression": "6 * 7"}, id="c1")]),
        Reply.tool_calls([ToolCall("current_time", {"timezone": "UTC"}, id="t1")]),
        Reply.text("Stored it; 6 * 7 = 42."),
    )


async def _chain_with_every_visibility(service: Service, tenant: str) -> dict[str, Any]:
    await service.create_tenant(tenant + "-x", enabled_tools=TOOLS)  # unrelated neighbour
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        assert (
            await admin.put(f"/api/v1/tenants/{tenant}/tools", json={"enabled_tools": TOOLS})
        ).status_code == 200
        assert (
            await admin.put(f"/api/v1/tenants/{tenant}/visibility", json=POLICY)
        ).status_code == 200
    _script(service)
    async with service.client(tenant, sub="alice", roles=("member",)) as member:
        accepted = await submit(member, input="Store the db credential, then compute 6 * 7.")
        async with member.stream("GET", f"/api/v1/tasks/{accepted['task_id']}/events") as r:
            await collect(r)
    return accepted


def _tool_of_each_step(steps: list[dict[str, Any]]) -> dict[int, str]:
    """Step number → the tool its call or result belongs to (full chain)."""
    by_correlation: dict[str, str] = {}
    tools: dict[int, str] = {}
    for step in steps:
        if step["tool_call"] is not None:
            by_correlation[step["tool_call"]["correlation_id"]] = step["tool_call"]["tool_name"]
            tools[step["step_number"]] = step["tool_call"]["tool_name"]
        elif step["tool_result"] is not None:
            tools[step["step_number"]] = by_correlation[step["tool_result"]["correlation_id"]]
    return tools


def _expected_view(full: list[dict[str, Any]], role: str) -> list[tuple[int, str]]:
    tools = _tool_of_each_step(full)
    expected = []
    for step in full:
        tool = tools.get(step["step_number"])
        form = "full" if tool is None else VIEWS[role].get(tool, "hidden")
        if form != "hidden":
            expected.append((step["step_number"], form))
    return expected


def _served_view(steps: list[dict[str, Any]]) -> list[tuple[int, str]]:
    served = []
    for step in steps:
        if set(step) == STEP_KEYS:
            assert step["visibility"]["level"] == "summary"
            assert step["visibility"]["summary"]
            served.append((step["step_number"], "summary"))
        else:
            served.append((step["step_number"], "full"))
    return served


async def _read_everything(
    service: Service, tenant: str, role: str, task_id: str, chain_id: str
) -> tuple[list[SSE], bytes, dict[str, Any], list[dict[str, Any]]]:
    async with service.client(tenant, sub=f"{role}-1", roles=(role,)) as client:
        async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
            raw = b"".join([chunk async for chunk in response.aiter_bytes()])
        events = []
        async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
            events = await collect(response)
        chain = await client.get(f"/api/v1/chains/{chain_id}")
        task_chain = await client.get(f"/api/v1/tasks/{task_id}/chain")
        pages: list[bytes] = []
        after: int | None = 0
        while after is not None:
            page = await client.get(
                f"/api/v1/chains/{chain_id}/steps", params={"after": after, "limit": 3}
            )
            assert page.status_code == 200
            pages.append(page.content)
            after = page.json()["next_after"]
        task = await client.get(f"/api/v1/tasks/{task_id}")
        listing = await client.get("/api/v1/tasks")
        export = await client.get(f"/api/v1/chains/{chain_id}/export")
    assert chain.status_code == task_chain.status_code == 200
    assert chain.json() == task_chain.json()
    # Viewers may not export; everyone else's export is its chain read, as a download.
    assert export.status_code == (403 if role == "viewer" else 200)
    if export.status_code == 200:
        assert export.json() == chain.json()
        assert export.headers["content-disposition"].startswith("attachment")
    every_byte = b"".join(
        [
            raw,
            chain.content,
            task_chain.content,
            *pages,
            task.content,
            listing.content,
            export.content,
        ]
    )
    paged = [step for body in pages for step in json.loads(body)["items"]]
    return events, every_byte, chain.json(), paged


async def test_each_role_gets_its_view_over_sse_and_rest_and_the_secret_reaches_only_the_auditor(
    service: Service, tenant: str
) -> None:
    accepted = await _chain_with_every_visibility(service, tenant)
    task_id, chain_id = accepted["task_id"], accepted["chain_id"]
    reads = {
        role: await _read_everything(service, tenant, role, task_id, chain_id)
        for role in ("auditor", "member", "viewer")
    }
    full_chain = reads["auditor"][2]["steps"]
    assert {step["tool_call"]["tool_name"] for step in full_chain if step["tool_call"]} == {
        "llm",
        *TOOLS,
    }

    for role, (events, every_byte, chain, paged) in reads.items():
        streamed = [event.json["step"] for event in events if event.event == "reasoning_step"]
        # SSE and REST agree, step for step.
        assert streamed == chain["steps"] == paged, role
        assert _served_view(chain["steps"]) == _expected_view(full_chain, role), role
        # Ids stay the stream's own: hidden steps leave gaps, nothing else is missing.
        ids = [event.id for event in events if event.id is not None]
        assert len(ids) == len(events)
        assert ids == sorted(ids)
        assert ids[-1] == reads["auditor"][0][-1].id
        assert [e.event for e in events if e.event != "reasoning_step"] == [
            "chain_started",
            "task_status",
            "chain_completed",
            "done",
        ]
        # Metrics are the true totals for every reader.
        assert chain["metrics"] == reads["auditor"][2]["metrics"]
        if role == "auditor":
            assert SECRET.encode() in every_byte
        else:
            assert SECRET.encode() not in every_byte, role
            vault_calls = [
                s
                for s in chain["steps"]
                if s.get("tool_call") and s["tool_call"]["tool_name"] == "vault_store"
            ]
            assert vault_calls[0]["tool_call"]["arguments"] == {
                "name": "db",
                "password": "[REDACTED]",
            }


async def test_a_restricted_reader_resumes_its_filtered_stream_without_gap_or_duplicate(
    service: Service, tenant: str
) -> None:
    accepted = await _chain_with_every_visibility(service, tenant)
    task_id = accepted["task_id"]
    async with service.client(tenant, sub="v", roles=("viewer",)) as client:
        async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
            whole = await collect(response)
        cut = whole[len(whole) // 2].id
        assert cut is not None
        async with client.stream(
            "GET", f"/api/v1/tasks/{task_id}/events", headers={"Last-Event-ID": str(cut)}
        ) as response:
            rest = await collect(response)

    assert [e for e in whole if e.id is not None and e.id <= cut] + rest == whole
    assert all(SECRET not in event.data for event in whole)


THOUGHT = "Thinking aloud: the margin figures look off, so recheck them with the calculator"


@pytest.mark.parametrize(
    ("policy", "form"),
    [
        ({"tool_types": {"llm": "hidden"}}, "hidden"),
        ({"tools": {"llm": "summary"}}, "summary"),
        (
            {"tools": {"llm": "summary"}, "roles": {"member": {"tool_types": {"llm": "hidden"}}}},
            "hidden",
        ),
    ],
)
async def test_a_thinking_step_reaches_a_reader_as_its_llm_steps_do(
    service: Service, tenant: str, policy: dict[str, Any], form: str
) -> None:
    await configure(service, tenant, "visibility", policy)
    service.fake_llm.script(
        MODEL,
        # Text alongside native tool calls is the model thinking aloud: a thinking step.
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "6 * 7"}, id="c1")], content=THOUGHT
        ),
        Reply.text("6 * 7 = 42."),
    )
    async with service.client(tenant, sub="alice", roles=("member",)) as member:
        accepted = await submit(member, input="What is 6 * 7?")
        await stream(member, accepted["task_id"])
    task_id, chain_id = accepted["task_id"], accepted["chain_id"]
    reads = {
        role: await _read_everything(service, tenant, role, task_id, chain_id)
        for role in ("auditor", "member")
    }

    full_chain = reads["auditor"][2]["steps"]
    [thought] = [step for step in full_chain if step["type"] == "thinking"]
    assert thought["thinking"]["thought"] == THOUGHT
    assert THOUGHT.encode() in reads["auditor"][1]
    tools = _tool_of_each_step(full_chain)
    llm_steps = [number for number, tool in tools.items() if tool == "llm"]
    events, every_byte, chain, paged = reads["member"]
    streamed = [event.json["step"] for event in events if event.event == "reasoning_step"]
    assert streamed == chain["steps"] == paged
    served = dict(_served_view(chain["steps"]))
    # The thought is seen as the model's own steps are: hidden or summarised with them.
    assert [served.get(number, "hidden") for number in [*llm_steps, thought["step_number"]]] == [
        form
    ] * (len(llm_steps) + 1)
    assert served[max(served)] == "full"  # the answer, which the task's result shows anyway
    if form == "summary":
        [summary] = [step for step in chain["steps"] if step["type"] == "thinking"]
        assert summary["visibility"] == {"level": "summary", "summary": "thinking step"}
    assert b"margin figures" not in every_byte


async def test_a_secret_of_an_early_step_is_masked_on_a_late_page(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "tools", {"enabled_tools": TOOLS})
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("vault_store", {"name": "db", "password": SECRET}, id="v")]),
        *[
            Reply.tool_calls([ToolCall("calculator", {"expression": f"{n} * 7"}, id=f"c{n}")])
            for n in range(1, 4)
        ],
        Reply.text(f"Stored the db credential {SECRET}."),
    )
    async with service.client(tenant, sub="alice", roles=("member",)) as member:
        accepted = await submit(member, input="Store the db credential, then do some sums.")
        await stream(member, accepted["task_id"])
    chain_id = accepted["chain_id"]
    pages = {}
    for role in ("member", "viewer", "auditor"):
        async with service.client(tenant, sub=f"{role}-1", roles=(role,)) as client:
            whole = (await client.get(f"/api/v1/chains/{chain_id}")).json()["steps"]
            last = whole[-1]["step_number"]
            page = await client.get(
                f"/api/v1/chains/{chain_id}/steps", params={"after": last - 1, "limit": 5}
            )
        assert page.status_code == 200
        pages[role] = page.json()

    # `whole` is the auditor's: the secret's step lies far before the page that repeats it.
    tools = _tool_of_each_step(whole)
    assert min(n for n, tool in tools.items() if tool == "vault_store") < last - 10
    for role, page in pages.items():
        [answer] = page["items"]
        assert answer["type"] == "synthesis"
        assert page["next_after"] is None
        masked = "[REDACTED]" if role != "auditor" else SECRET
        assert answer["synthesis"]["conclusion"] == f"Stored the db credential {masked}.", role


# A hidden tool's result, told to the model, is in the next LLM call's recorded prompt.
MARKER = "QUOKKA-5521-ledger-balance"
ENCODED = base64.b64encode(MARKER.encode()).decode()
HIDING = {
    "tools": {"text_transform": "hidden"},
    "roles": {"viewer": {"tools": {"text_transform": "summary"}}},
}


async def _decoding_task(service: Service, tenant: str, **submission: Any) -> dict[str, Any]:
    """A member's task whose model decodes a text with `text_transform` (hidden from members,
    summarised for viewers), then answers without repeating it."""
    await configure(service, tenant, "tools", {"enabled_tools": ["text_transform"]})
    await configure(service, tenant, "visibility", HIDING)
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("text_transform", {"operation": "base64_decode", "text": ENCODED}, id="d1")]
        ),
        Reply.text("Decoded it; the balance is on file."),
    )
    async with service.client(tenant, sub="alice", roles=("member",)) as member:
        accepted = await submit(member, input="Decode the ledger line I was sent.", **submission)
        await stream(member, accepted["task_id"])
    # The model was told the result: the second call's prompt holds it.
    second = service.fake_llm.requests_for(MODEL)[-1].body
    assert MARKER in tool_message(second)
    return accepted


async def _everything_read(client: httpx.AsyncClient, task_id: str, chain_id: str) -> bytes:
    """Every answer that shows the task's steps to `client`: its stream (every event's raw
    data), its chain both ways, its pages and its export (when permitted)."""
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
        assert response.status_code == 200
        raw = b"".join([chunk async for chunk in response.aiter_bytes()])
    # Resumed after the tool's steps (ids 3-6 are the first four steps), with the prompt next.
    resumed = {"Last-Event-ID": "6"}
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events", headers=resumed) as r:
        assert r.status_code == 200
        raw += b"".join([chunk async for chunk in r.aiter_bytes()])
    answers = [
        await client.get(f"/api/v1/chains/{chain_id}"),
        await client.get(f"/api/v1/tasks/{task_id}/chain"),
        # The second page starts after the tool's steps, with the prompt that repeats them.
        await client.get(f"/api/v1/chains/{chain_id}/steps", params={"after": 0, "limit": 4}),
        await client.get(f"/api/v1/chains/{chain_id}/steps", params={"after": 4, "limit": 50}),
        await client.get(f"/api/v1/tasks/{task_id}"),
    ]
    assert all(answer.status_code == 200 for answer in answers)
    export = await client.get(f"/api/v1/chains/{chain_id}/export")
    assert export.status_code in (200, 403)
    if export.status_code == 200:
        answers.append(export)
    return raw + b"".join(answer.content for answer in answers)


def _prompt_messages(chain: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of the chain's LLM calls that tell the model a tool's result."""
    return [
        message
        for step in chain["steps"]
        if step.get("tool_call") and step["tool_call"]["tool_name"] == "llm"
        for message in step["tool_call"]["arguments"]["messages"]
        if message["role"] == "tool"
    ]


async def test_a_hidden_tools_result_appears_nowhere_in_a_members_chain_stream_or_export(
    service: Service, tenant: str
) -> None:
    accepted = await _decoding_task(service, tenant)
    task_id, chain_id = accepted["task_id"], accepted["chain_id"]
    async with service.client(tenant, sub="alice", roles=("member",)) as member:
        seen_by_member = await _everything_read(member, task_id, chain_id)
        chain = (await member.get(f"/api/v1/chains/{chain_id}")).json()
        replayed = await member.post(f"/api/v1/tasks/{task_id}/replay", json={})
        assert replayed.status_code == 202, replayed.text
        replay = replayed.json()
        seen_by_member += await _everything_read(member, replay["task_id"], replay["chain_id"])
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        seen_by_admin = await _everything_read(admin, task_id, chain_id)
        replay_seen_by_admin = await _everything_read(admin, replay["task_id"], replay["chain_id"])

    assert MARKER.encode() in seen_by_admin
    assert MARKER.encode() in replay_seen_by_admin
    assert MARKER.encode() not in seen_by_member
    # The prompt keeps its shape: the call and its result are there, their content is not.
    [told] = _prompt_messages(chain)
    assert told == {"role": "tool", "tool_call_id": "d1", "content": "[hidden]"}
    # The steps themselves are hidden from the member: only the LLM's remain.
    tools = {(s["tool_call"] or s["tool_result"] or {}).get("tool_name") for s in chain["steps"]}
    assert tools == {"llm", None}


async def test_a_summary_reader_sees_the_summary_of_a_result_in_the_prompt_not_the_result(
    service: Service, tenant: str
) -> None:
    accepted = await _decoding_task(service, tenant)
    task_id, chain_id = accepted["task_id"], accepted["chain_id"]
    async with service.client(tenant, sub="vera", roles=("viewer",)) as viewer:
        seen = await _everything_read(viewer, task_id, chain_id)
        chain = (await viewer.get(f"/api/v1/chains/{chain_id}")).json()

    assert MARKER.encode() not in seen
    [told] = _prompt_messages(chain)
    assert told["content"] == "text_transform: base64_decode"
    summaries = [s["visibility"]["summary"] for s in chain["steps"] if set(s) == STEP_KEYS]
    assert told["content"] in summaries


async def test_a_hidden_result_of_an_earlier_turn_is_hidden_in_the_next_turns_prompt(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, sub="alice", roles=("member",)) as member:
        started = await member.post("/api/v1/conversations", json={})
        assert started.status_code == 201, started.text
        conversation = started.json()["id"]
    await _decoding_task(service, tenant, conversation_id=conversation)
    async with service.client(tenant, sub="alice", roles=("member",)) as member:
        service.fake_llm.script(MODEL, Reply.text("It is still on file."))
        second = await submit(member, input="Is it still there?", conversation_id=conversation)
        await stream(member, second["task_id"])
        # The second turn's first prompt is the conversation so far, the result included.
        assert MARKER in tool_message(service.fake_llm.requests_for(MODEL)[-1].body)
        seen_by_member = await _everything_read(member, second["task_id"], second["chain_id"])
        chain = (await member.get(f"/api/v1/chains/{second['chain_id']}")).json()
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        seen_by_admin = await _everything_read(admin, second["task_id"], second["chain_id"])

    assert MARKER.encode() in seen_by_admin
    assert MARKER.encode() not in seen_by_member
    [told] = _prompt_messages(chain)
    assert told["content"] == "[hidden]"
