"""The OpenAI-compatible endpoint, through the official `openai` SDK pointed at the service: a
model is one of the tenant's agents, a completion runs it with its tools, `usage` is the
task's, the task id comes back in a header, and errors read as OpenAI errors."""

from typing import Any

import openai
import pytest
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from tests.api.helpers import PROBLEM, assert_problem, define_agent, script_two_tool_task
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service

QUESTION: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is 17 * 23 + 4, and the time in Tokyo?"}
]
ANSWER = "17 * 23 + 4 = 395."
TWO_TOOLS = ["calculator", "current_time"]


def _sdk(service: Service, tenant: str, **token: Any) -> AsyncOpenAI:
    # No retries: a retried completion would be another task.
    return AsyncOpenAI(
        base_url=f"{service.base_url}/v1", api_key=service.token(tenant, **token), max_retries=0
    )


async def _task(service: Service, tenant: str, task_id: str) -> dict[str, Any]:
    async with service.client(tenant) as client:
        response = await client.get(f"/api/v1/tasks/{task_id}")
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()
    return task


async def _tools_called(service: Service, tenant: str, chain_id: str) -> list[str]:
    async with service.client(tenant) as client:
        chain = (await client.get(f"/api/v1/chains/{chain_id}")).json()
    return [
        step["tool_call"]["tool_name"]
        for step in chain["steps"]
        if step["type"] == "tool_call" and step["tool_call"]["tool_name"] != "llm"
    ]


def _usage_of(task: dict[str, Any]) -> dict[str, int]:
    usage = task["usage"]
    return {
        "prompt_tokens": usage["input_tokens"],
        "completion_tokens": usage["output_tokens"],
        "total_tokens": usage["total_tokens"],
    }


async def test_a_completion_runs_the_agent_with_its_tools_and_answers_with_the_tasks_usage(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "clock-calc", tools=TWO_TOOLS)
    script_two_tool_task(service.fake_llm)
    async with _sdk(service, tenant) as sdk:
        raw = await sdk.chat.completions.with_raw_response.create(
            model="agent:clock-calc", messages=QUESTION, temperature=0.2
        )
    completion = raw.parse()
    task_id = raw.headers["x-omniforge-task-id"]
    task = await _task(service, tenant, task_id)

    assert completion.choices[0].message.content == ANSWER
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "agent:clock-calc@1"
    assert completion.id == f"chatcmpl-{task_id.replace('-', '')}"
    assert completion.usage is not None
    assert completion.usage.model_dump(
        include={"prompt_tokens", "completion_tokens", "total_tokens"}
    ) == _usage_of(task)
    assert completion.usage.prompt_tokens == 100 + 150 + 200
    assert task["status"] == "completed"
    assert task["agent"] == {"name": "clock-calc", "version": 1}
    assert task["messages"] == QUESTION
    # The header's task opens the chain, which shows both tools at work.
    assert raw.headers["x-omniforge-chain-id"] == task["chain_id"]
    assert await _tools_called(service, tenant, task["chain_id"]) == TWO_TOOLS


async def test_a_streamed_completion_sends_the_answer_in_chunks_then_the_usage(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "clock-calc", tools=TWO_TOOLS)
    service.fake_llm.script(
        MODEL,
        # Words written before a tool call are not the answer: they never reach the client.
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "17 * 23 + 4"}, id="c1")],
            content="Let me calculate first.",
            prompt_tokens=100,
            completion_tokens=20,
        ),
        Reply.tool_calls(
            [ToolCall("current_time", {"timezone": "Asia/Tokyo"}, id="c2")],
            prompt_tokens=150,
            completion_tokens=25,
        ),
        Reply.text(ANSWER, prompt_tokens=200, completion_tokens=30),
    )
    async with _sdk(service, tenant) as sdk:
        raw = await sdk.chat.completions.with_raw_response.create(
            model="clock-calc",
            messages=QUESTION,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in raw.parse()]
    task = await _task(service, tenant, raw.headers["x-omniforge-task-id"])

    assert raw.headers["content-type"].startswith("text/event-stream")
    assert raw.headers["x-omniforge-chain-id"] == task["chain_id"]
    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    # The model's own pieces, word by word, and nothing else.
    assert pieces == ["17 ", "* ", "23 ", "+ ", "4 ", "= ", "395."]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    usage = chunks[-1].usage
    assert chunks[-1].choices == []
    assert usage is not None
    assert usage.model_dump(
        include={"prompt_tokens", "completion_tokens", "total_tokens"}
    ) == _usage_of(task)
    assert all(chunk.id == chunks[0].id for chunk in chunks)
    assert await _tools_called(service, tenant, task["chain_id"]) == TWO_TOOLS


async def test_the_models_are_the_tenants_agents_that_run_tasks(
    service: Service, tenant: str, other_tenant: str
) -> None:
    await define_agent(service, tenant, "writer")
    await define_agent(service, tenant, "retired")
    await define_agent(service, other_tenant, "theirs")
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        assert (await admin.delete("/api/v1/agents/retired")).status_code == 204
    async with _sdk(service, tenant, roles=("viewer",)) as sdk:
        models = [model async for model in sdk.models.list()]

    assert [model.id for model in models] == ["agent:default", "agent:writer"]
    assert {model.object for model in models} == {"model"}
    assert {model.owned_by for model in models} == {tenant}
    assert all(model.created > 0 for model in models)


async def test_another_tenants_agent_and_unknown_models_are_not_found(
    service: Service, tenant: str, other_tenant: str
) -> None:
    await define_agent(service, other_tenant, "theirs")
    await define_agent(service, tenant, "retired")
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        assert (await admin.delete("/api/v1/agents/retired")).status_code == 204
    refused = []
    async with _sdk(service, tenant) as sdk:
        for model in ("agent:theirs", "theirs", "agent:retired", "gpt-4o", "agent:Bad Name"):
            with pytest.raises(openai.NotFoundError) as caught:
                await sdk.chat.completions.create(model=model, messages=QUESTION)
            refused.append(caught.value)

    for error in refused:
        assert error.code == "not-found"
        assert error.param == "model"
        assert error.type == "invalid_request_error"
        problem = error.response.json()
        assert problem["type"] == "https://omniforge.dev/problems/not-found"
        assert problem["error"]["message"].startswith(problem["detail"])
        assert "x-omniforge-task-id" not in error.response.headers
    # Nothing tells another tenant's agent from one that never existed.
    assert (
        refused[0].response.json()["detail"]
        == "no model 'agent:theirs': no such agent in this tenant"
    )
    assert "archived" in refused[2].response.json()["detail"]


async def test_without_credentials_the_endpoint_answers_401_as_a_problem_with_an_openai_error(
    service: Service,
) -> None:
    async with service.client() as client:
        completion = await client.post(
            "/v1/chat/completions", json={"model": "agent:default", "messages": QUESTION}
        )
        models = await client.get("/v1/models")
    async with AsyncOpenAI(
        base_url=f"{service.base_url}/v1", api_key="not-a-token", max_retries=0
    ) as sdk:
        with pytest.raises(openai.AuthenticationError) as caught:
            await sdk.models.list()

    for response in (completion, models):
        body = assert_problem(response, 401, "unauthorized")
        assert body["error"]["type"] == "authentication_error"
        assert body["error"]["message"] == body["detail"]
    assert caught.value.status_code == 401
    assert caught.value.type == "authentication_error"


async def test_a_run_that_spends_its_budget_answers_402_and_a_failing_model_502(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "thrifty", tools=TWO_TOOLS, budget={"max_llm_calls": 1})
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "17 * 23 + 4"}, id="c1")]),
        Reply.error(500, "the provider is down"),
    )
    async with _sdk(service, tenant) as sdk:
        with pytest.raises(openai.APIStatusError) as spent:
            await sdk.chat.completions.create(model="agent:thrifty", messages=QUESTION)
        with pytest.raises(openai.InternalServerError) as failed:
            await sdk.chat.completions.create(model="agent:default", messages=QUESTION)

    assert spent.value.status_code == 402
    body = spent.value.body
    assert isinstance(body, dict)
    assert body["code"] == "budget_exceeded"
    assert body["type"] == "insufficient_quota"
    task_id = spent.value.response.headers["x-omniforge-task-id"]
    task = await _task(service, tenant, task_id)
    assert task["status"] == "failed"
    assert task["error_code"] == "budget_exceeded"
    assert spent.value.response.json()["task_id"] == task_id
    assert spent.value.response.headers["content-type"] == PROBLEM

    assert failed.value.status_code == 502
    assert failed.value.code == "llm_error"
    assert failed.value.response.json()["error_code"] == "llm_error"


async def test_a_streamed_run_that_fails_ends_the_stream_with_its_error(
    service: Service, tenant: str
) -> None:
    service.fake_llm.script(MODEL, Reply.error(500, "the provider is down"))
    async with _sdk(service, tenant) as sdk:
        stream = await sdk.chat.completions.create(
            model="agent:default", messages=QUESTION, stream=True
        )
        received: list[Any] = []

        async def read_all() -> None:
            async for chunk in stream:
                received.append(chunk)

        with pytest.raises(openai.APIError) as caught:
            await read_all()

    assert [c.choices[0].delta.role for c in received] == ["assistant"]
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["code"] == "llm_error"
    assert body["type"] == "server_error"
    task = await _task(service, tenant, body["task_id"])
    assert task["status"] == "failed"


async def test_unsupported_parameters_are_refused_naming_the_field(
    service: Service, tenant: str
) -> None:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
    async with _sdk(service, tenant) as sdk:
        with pytest.raises(openai.UnprocessableEntityError) as two_choices:
            await sdk.chat.completions.create(model="agent:default", messages=QUESTION, n=2)
        with pytest.raises(openai.UnprocessableEntityError) as client_tools:
            await sdk.chat.completions.create(
                model="agent:default",
                messages=QUESTION,
                tools=[tool],  # type: ignore[list-item]
            )
        with pytest.raises(openai.UnprocessableEntityError) as images:
            await sdk.chat.completions.create(
                model="agent:default",
                messages=[
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}],
                    }
                ],
            )

    for caught, param in ((two_choices, "n"), (client_tools, "tools"), (images, "messages")):
        body = caught.value.body
        assert isinstance(body, dict)
        assert str(body["param"]).startswith(param), body
        assert body["code"] == "validation-error"
        assert caught.value.response.json()["errors"][0]["field"].startswith(f"body.{param}")
