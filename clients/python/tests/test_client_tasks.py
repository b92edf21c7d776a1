"""Tasks through the client, blocking and asyncio, against the real service: submit, follow
the typed stream, wait, read, list page by page, cancel, chain and costs; typed errors."""

import asyncio
from decimal import Decimal
from uuid import uuid4

import pytest
from omniforge_client import (
    AsyncOmniForge,
    ChainCompletedEvent,
    ChainStartedEvent,
    DoneEvent,
    NotFound,
    OmniForge,
    ReasoningStep,
    ReasoningStepEvent,
    TaskFinished,
    TaskStatusEvent,
    Unauthorized,
    ValidationFailed,
)

from tests.api.helpers import TWO_TOOL_TASK_COST, script_two_tool_task
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service

STEPS = 11  # the two-tool task: three LLM calls, two tools, each a call and a result; the answer


def _client(service: Service, tenant: str, **token: object) -> OmniForge:
    return OmniForge(service.base_url, token=service.token(tenant, **token))  # type: ignore[arg-type]


async def test_a_blocking_client_submits_follows_the_typed_stream_and_reads_the_task(
    service: Service, tenant: str
) -> None:
    script_two_tool_task(service.fake_llm)

    def scenario() -> None:
        with _client(service, tenant) as client:
            accepted = client.tasks.create("What is 17 * 23 + 4?", metadata={"ticket": 7})
            events = list(client.tasks.stream(accepted.task_id))
            task = client.tasks.get(accepted.task_id)
            chain = client.tasks.chain(accepted.task_id)
            costs = client.tasks.costs(accepted.task_id)

        assert accepted.status == "submitted"
        assert [type(e) for e in events[:2]] == [ChainStartedEvent, TaskStatusEvent]
        assert all(isinstance(e, ReasoningStepEvent) for e in events[2:-2])
        assert [type(e) for e in events[-2:]] == [ChainCompletedEvent, DoneEvent]
        assert [e.event_id for e in events] == list(range(1, STEPS + 5))
        completed, done = events[-2], events[-1]
        assert isinstance(completed, ChainCompletedEvent)
        assert completed.answer == "17 * 23 + 4 = 395."
        assert isinstance(done, DoneEvent)
        assert done.final_state == "completed"

        assert task.status == "completed"
        assert task.is_finished
        assert task.answer == "17 * 23 + 4 = 395."
        assert task.metadata == {"ticket": 7}
        assert task.usage.total_cost_usd == TWO_TOOL_TASK_COST
        assert isinstance(task.usage.total_cost_usd, Decimal)
        assert chain.status == "completed"
        assert len(chain.steps) == STEPS
        assert all(isinstance(step, ReasoningStep) for step in chain.steps)
        streamed = [e.step.id for e in events if isinstance(e, ReasoningStepEvent)]
        assert [step.id for step in chain.steps] == streamed
        assert costs.totals.cost_usd == TWO_TOOL_TASK_COST
        assert costs.totals.calls == 3

    await asyncio.to_thread(scenario)


async def test_an_async_client_waits_for_a_task_and_gets_its_result(
    service: Service, tenant: str
) -> None:
    service.fake_llm.script(MODEL, Reply.text("Forty-two."))
    async with AsyncOmniForge(service.base_url, token=service.token(tenant)) as client:
        accepted = await client.tasks.create(messages=[{"role": "user", "content": "Answer?"}])
        task = await client.tasks.wait(accepted.task_id)

    assert task.id == accepted.task_id
    assert task.status == "completed"
    assert task.answer == "Forty-two."
    assert task.messages == [{"role": "user", "content": "Answer?"}]


async def test_listing_follows_the_cursor_across_pages_newest_first(
    service: Service, tenant: str
) -> None:
    service.fake_llm.script(MODEL, *(Reply.text(f"answer {n}") for n in range(3)))
    async with AsyncOmniForge(service.base_url, token=service.token(tenant)) as client:
        ids = []
        for n in range(3):
            accepted = await client.tasks.create(f"question {n}")
            await client.tasks.wait(accepted.task_id)
            ids.append(accepted.task_id)
        listed = [task.id async for task in client.tasks.list(page_size=2)]
        completed = [t.id async for t in client.tasks.list(status="completed", page_size=1)]

    assert listed == ids[::-1]
    assert completed == ids[::-1]

    def blocking() -> list[object]:
        with _client(service, tenant) as client:
            return [task.id for task in client.tasks.list(page_size=2)]

    assert await asyncio.to_thread(blocking) == ids[::-1]


async def test_cancelling_a_running_task_and_then_again_is_typed(
    service: Service, tenant: str
) -> None:
    gate = asyncio.Event()
    service.fake_llm.script(MODEL, Reply.text("too late", gate=gate))
    async with AsyncOmniForge(service.base_url, token=service.token(tenant)) as client:
        accepted = await client.tasks.create("Take your time.")
        await service.fake_llm.wait_for_requests(1)
        cancelled = await client.tasks.cancel(accepted.task_id)
        with pytest.raises(TaskFinished) as again:
            await client.tasks.cancel(accepted.task_id)
    gate.set()

    assert cancelled.status == "cancelled"
    assert again.value.status == 409
    assert again.value.slug == "task-finished"


async def test_another_tenants_task_is_not_found_in_both_clients(
    service: Service, tenant: str, other_tenant: str
) -> None:
    service.fake_llm.script(MODEL, Reply.text("mine"))
    async with AsyncOmniForge(service.base_url, token=service.token(other_tenant)) as owner:
        accepted = await owner.tasks.create("Private question")
        await owner.tasks.wait(accepted.task_id)
    async with AsyncOmniForge(service.base_url, token=service.token(tenant)) as stranger:
        with pytest.raises(NotFound) as read:
            await stranger.tasks.get(accepted.task_id)
        with pytest.raises(NotFound):
            [event async for event in stranger.tasks.stream(accepted.task_id)]

    def blocking() -> NotFound:
        with _client(service, tenant) as client, pytest.raises(NotFound) as caught:
            client.tasks.chain(accepted.task_id)
        return caught.value

    blocked = await asyncio.to_thread(blocking)
    for error in (read.value, blocked):
        assert error.status == 404
        assert error.type == "https://omniforge.dev/problems/not-found"
        assert error.body["status"] == 404
        assert error.detail


async def test_invalid_input_raises_validation_failed_naming_the_fields(
    service: Service, tenant: str
) -> None:
    async with AsyncOmniForge(service.base_url, token=service.token(tenant)) as client:
        with pytest.raises(ValidationFailed) as caught:
            await client.tasks.create("x", budget={"max_tokens": -1})
        with pytest.raises(ValidationFailed) as unknown:
            await client.tasks.get("not-a-uuid")

    assert caught.value.status == 422
    assert caught.value.slug == "validation-error"
    assert [e.field for e in caught.value.errors] == ["body.budget.max_tokens"]
    assert all(e.message for e in caught.value.errors)
    assert [e.field for e in unknown.value.errors] == ["path.task_id"]


async def test_no_or_a_wrong_credential_raises_unauthorized(service: Service, tenant: str) -> None:
    async with AsyncOmniForge(service.base_url) as anonymous:
        with pytest.raises(Unauthorized) as missing:
            await anonymous.tasks.get(uuid4())

    def blocking() -> Unauthorized:
        with OmniForge(service.base_url, api_key="omf_not-a-key") as client:
            with pytest.raises(Unauthorized) as caught:
                next(client.tasks.list())
            return caught.value

    wrong = await asyncio.to_thread(blocking)
    assert missing.value.status == wrong.status == 401
    assert wrong.response.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_client_takes_an_api_key_or_a_token_not_both() -> None:
    with pytest.raises(ValueError, match="not both"):
        OmniForge("http://127.0.0.1:1", api_key="a", token="b")


async def test_a_retried_submission_with_an_idempotency_key_makes_one_task(
    service: Service, tenant: str
) -> None:
    async with AsyncOmniForge(service.base_url, token=service.token(tenant)) as client:
        first = await client.tasks.create("What is 6 * 7?", model="demo", idempotency_key="k-42")
        again = await client.tasks.create("What is 6 * 7?", model="demo", idempotency_key="k-42")
        with pytest.raises(ValidationFailed) as refused:
            await client.tasks.create("What is 6 * 8?", model="demo", idempotency_key="k-42")
        task = await client.tasks.wait(first.task_id)

    assert again.task_id == first.task_id
    assert refused.value.slug == "idempotency-key-reused"
    assert task.status == "completed"
