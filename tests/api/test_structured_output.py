"""Structured output through the running service: a task run by an agent with a
`response_format` has its answer as JSON in `output` (beside the text `result`); an answer
that does not match goes back to the model with what is wrong; one that never matches fails the
task `invalid_output`; models that can enforce the schema are asked to, others are told it."""

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.helpers import define_agent, stream, submit
from tests.factories import fake_deployment
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.service import INPUT_PRICE, MODEL, OUTPUT_PRICE, Service, service_with_model

SCHEMA_MODEL, SCHEMA_UPSTREAM = "schema-model", "gpt-4o"
CITY: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
}
PARIS = {"city": "Paris", "population": 2102650}


async def _ask(service: Service, tenant: str, agent: str) -> tuple[dict[str, Any], list[Any]]:
    async with service.client(tenant) as client:
        accepted = await submit(client, input="Which is the capital of France?", agent=agent)
        events = await stream(client, accepted["task_id"])
        response = await client.get(f"/api/v1/tasks/{accepted['task_id']}")
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()
    return task, events


async def test_a_valid_answer_is_the_tasks_output(service: Service, tenant: str) -> None:
    await define_agent(service, tenant, "geo", response_format=CITY)
    service.fake_llm.script(MODEL, Reply.text(json.dumps(PARIS)))

    task, events = await _ask(service, tenant, "geo")

    assert task["status"] == "completed"
    assert task["agent"] == {"name": "geo", "version": 1}
    assert task["output"] == PARIS
    assert task["result"] == json.dumps(PARIS)
    assert task["stop_reason"] is None
    [completed] = [e.json for e in events if e.event == "chain_completed"]
    assert completed["output"] == PARIS
    # fake-model is unknown to LiteLLM: the schema is in the prompt, not on the request.
    [request] = service.fake_llm.requests_for(MODEL)
    assert "response_format" not in request.body
    # The last line of the system prompt (Postgres keeps a definition's keys in its own order).
    assert json.loads(request.body["messages"][0]["content"].rsplit("\n", 1)[1]) == CITY


async def test_output_text_the_databases_refuse_is_stored_as_all_model_text_is(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "geo", response_format=CITY)
    # JSON escapes for U+0000 and a lone surrogate: valid JSON, refused by Postgres.
    service.fake_llm.script(MODEL, Reply.text('{"city": "Par\\u0000is \\ud800", "population": 1}'))

    task, events = await _ask(service, tenant, "geo")

    assert task["status"] == "completed"
    assert task["output"] == {"city": "Par\u2400is \ufffd", "population": 1}
    [completed] = [e.json for e in events if e.event == "chain_completed"]
    assert completed["output"] == task["output"]


async def test_an_agent_without_a_response_format_has_no_output(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "plain")
    service.fake_llm.script(MODEL, Reply.text(json.dumps(PARIS)))

    task, _ = await _ask(service, tenant, "plain")

    assert task["status"] == "completed"
    assert task["result"] == json.dumps(PARIS)
    assert task["output"] is None


async def test_an_invalid_first_answer_is_retried_with_its_errors_then_accepted(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "geo", response_format=CITY)
    service.fake_llm.script(
        MODEL, Reply.text('{"city": "Paris", "population": "2.1M"}'), Reply.text(json.dumps(PARIS))
    )

    task, events = await _ask(service, tenant, "geo")

    assert task["status"] == "completed"
    assert task["output"] == PARIS
    _, second = service.fake_llm.requests_for(MODEL)
    feedback = second.body["messages"][-1]
    assert feedback["role"] == "user"
    assert "at $.population: '2.1M' is not of type 'integer'" in feedback["content"]
    thoughts = [
        e.json["step"]["thinking"]["thought"]
        for e in events
        if e.event == "reasoning_step" and e.json["step"]["type"] == "thinking"
    ]
    assert len(thoughts) == 1
    assert "'2.1M' is not of type 'integer'" in thoughts[0]


async def test_answers_that_never_match_fail_invalid_output_after_one_call_plus_retries(
    service: Service, tenant: str
) -> None:
    retries = service.settings.output_retries
    assert retries == 2  # the default
    await define_agent(service, tenant, "geo", response_format=CITY)
    service.fake_llm.script(
        MODEL,
        *[Reply.text("Paris, of course.") for _ in range(retries)],
        Reply.text('{"city": "Paris"}'),
    )

    task, events = await _ask(service, tenant, "geo")

    assert len(service.fake_llm.requests_for(MODEL)) == 1 + retries
    assert task["status"] == "failed"
    assert task["error_code"] == "invalid_output"
    assert "'population' is a required property" in task["error_message"]
    assert task["output"] is None
    assert task["result"] is None
    [failed] = [e.json for e in events if e.event == "chain_failed"]
    assert failed["details"]["attempts"] == 1 + retries
    assert events[-1].json["final_state"] == "failed"


@pytest.fixture
async def schema_service(
    database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> AsyncIterator[Service]:
    """A service whose `schema-model` is `openai/gpt-4o` (which LiteLLM says takes a JSON
    Schema `response_format`), served by the fake server."""
    schema_model = fake_deployment(
        fake_llm,
        SCHEMA_MODEL,
        upstream=SCHEMA_UPSTREAM,
        input_cost=INPUT_PRICE,
        output_cost=OUTPUT_PRICE,
        native_tools=True,
    )
    async with service_with_model(tmp_path, database_url, fake_llm, schema_model) as service:
        yield service


async def test_a_model_that_supports_schemas_gets_the_response_format_on_the_request(
    schema_service: Service, tenant: str
) -> None:
    await define_agent(schema_service, tenant, "geo", model=SCHEMA_MODEL, response_format=CITY)
    schema_service.fake_llm.script(SCHEMA_UPSTREAM, Reply.text(json.dumps(PARIS)))

    task, _ = await _ask(schema_service, tenant, "geo")

    assert task["status"] == "completed"
    assert task["model"] == SCHEMA_MODEL
    assert task["output"] == PARIS
    [request] = schema_service.fake_llm.requests_for(SCHEMA_UPSTREAM)
    assert request.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "final_answer", "schema": CITY},
    }
    assert '"population"' not in request.body["messages"][0]["content"]
