"""Structured output on the real ReAct agent: fake provider over HTTP → LiteLLM → executor →
chain. The schema is enforced by the provider where LiteLLM says it can be, stated in the
system prompt otherwise; every answer is checked, a wrong one goes back to the model with what
is wrong, and one that never matches fails the task `invalid_output`."""

import json
from pathlib import Path
from typing import Any

import pytest

from app.agents import AgentRuntime, AgentTask
from app.agents.base import ToolCallingMode
from app.agents.output import SCHEMA_NAME, OutputFormat
from app.agents.spec import AgentSpec
from app.chain import (
    ChainCompletedEvent,
    ChainEvent,
    ChainFailedEvent,
    ChainStatus,
    DoneEvent,
    ErrorCode,
    ReasoningChain,
    StepType,
    TaskState,
    chain_event_adapter,
)
from tests.factories import fake_deployment, runtime_for
from tests.fakes.openai_server import FakeLLMServer, Reply

# `openai/gpt-4o` takes a JSON Schema `response_format` (LiteLLM's map says so);
# `openai/plain-model` is unknown to LiteLLM, so it does not.
SCHEMA_MODEL, SCHEMA_UPSTREAM = "schema-model", "gpt-4o"
PLAIN_MODEL = "plain-model"

CITY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "population": {"type": "integer", "minimum": 0},
    },
    "required": ["city", "population"],
    "additionalProperties": False,
}
PARIS = {"city": "Paris", "population": 2102650}


def _runtime(
    server: FakeLLMServer, tmp_path: Path, *, mode: ToolCallingMode = "auto", **settings: Any
) -> AgentRuntime:
    deployments = [
        fake_deployment(
            server,
            SCHEMA_MODEL,
            upstream=SCHEMA_UPSTREAM,
            input_cost="0.0000025",
            output_cost="0.00001",
            native_tools=True,
        ),
        fake_deployment(
            server, PLAIN_MODEL, input_cost="0.000001", output_cost="0.000002", native_tools=True
        ),
    ]
    return runtime_for(tmp_path, deployments, default_model=PLAIN_MODEL, mode=mode, **settings)


async def _run(
    runtime: AgentRuntime, spec: AgentSpec, question: str = "Which is the capital of France?"
) -> tuple[list[ChainEvent], ReasoningChain]:
    run = runtime.agent_for(spec).start(AgentTask(input=question))
    events = [event async for event in run.events()]
    return events, run.chain


def _completed(events: list[ChainEvent]) -> ChainCompletedEvent:
    completed = events[-2]
    assert isinstance(completed, ChainCompletedEvent), completed
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.final_state is TaskState.COMPLETED
    return completed


def _failed(events: list[ChainEvent]) -> ChainFailedEvent:
    failed = events[-2]
    assert isinstance(failed, ChainFailedEvent), failed
    return failed


def _thoughts(chain: ReasoningChain) -> list[str]:
    return [step.thinking.thought for step in chain.steps if step.thinking is not None]


async def test_a_model_that_supports_schemas_is_sent_the_response_format_natively(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path)
    fake_llm.script(SCHEMA_UPSTREAM, Reply.text(json.dumps(PARIS)))

    events, chain = await _run(runtime, AgentSpec(model=SCHEMA_MODEL, response_format=CITY))

    completed = _completed(events)
    assert completed.output == PARIS
    assert completed.answer == json.dumps(PARIS)
    synthesis = chain.steps[-1].synthesis
    assert synthesis is not None
    assert synthesis.output == PARIS
    assert synthesis.stop_reason is None
    [request] = fake_llm.requests
    assert request.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": SCHEMA_NAME, "schema": CITY},
    }
    # The provider enforces it: the prompt does not repeat it.
    assert json.dumps(CITY) not in request.body["messages"][0]["content"]
    # The call step records what was asked for.
    call = chain.steps[0].tool_call
    assert call is not None
    assert call.arguments["response_format"]["json_schema"]["schema"] == CITY


async def test_other_models_are_told_the_schema_and_a_fenced_answer_is_accepted(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path)
    fake_llm.script(PLAIN_MODEL, Reply.text(f"```json\n{json.dumps(PARIS, indent=2)}\n```"))

    events, _ = await _run(
        runtime, AgentSpec(instructions="You answer geography questions.", response_format=CITY)
    )

    assert _completed(events).output == PARIS
    [request] = fake_llm.requests
    assert "response_format" not in request.body
    system = request.body["messages"][0]["content"]
    assert system.startswith("You answer geography questions.\n\n")
    assert system.endswith(json.dumps(CITY))


async def test_a_schema_without_an_object_at_its_top_is_told_even_to_a_model_that_supports_them(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path)
    cities = {"type": "array", "items": {"type": "string"}, "minItems": 2}
    fake_llm.script(SCHEMA_UPSTREAM, Reply.text('["Paris", "Lyon"]'))

    events, _ = await _run(runtime, AgentSpec(model=SCHEMA_MODEL, response_format=cities))

    assert _completed(events).output == ["Paris", "Lyon"]
    [request] = fake_llm.requests
    assert "response_format" not in request.body
    assert request.body["messages"][0]["content"].endswith(json.dumps(cities))


@pytest.mark.parametrize("model", [SCHEMA_MODEL, PLAIN_MODEL])
async def test_an_invalid_answer_goes_back_with_its_errors_and_the_corrected_one_is_accepted(
    fake_llm: FakeLLMServer, tmp_path: Path, model: str
) -> None:
    runtime = _runtime(fake_llm, tmp_path)
    upstream = SCHEMA_UPSTREAM if model == SCHEMA_MODEL else PLAIN_MODEL
    wrong = '{"city": 75, "population": -3}'
    fake_llm.script(upstream, Reply.text(wrong), Reply.text(json.dumps(PARIS)))

    events, chain = await _run(runtime, AgentSpec(model=model, response_format=CITY))

    assert _completed(events).output == PARIS
    first, second = fake_llm.requests
    assert second.body["messages"][-2] == {"role": "assistant", "content": wrong}
    feedback = second.body["messages"][-1]
    assert feedback["role"] == "user"
    assert "at $.city: 75 is not of type 'string'" in feedback["content"]
    assert "at $.population: -3 is less than the minimum of 0" in feedback["content"]
    assert second.body.get("response_format") == first.body.get("response_format")
    # The judgement is recorded, under the reply it judged.
    [thought] = [step for step in chain.steps if step.type is StepType.THINKING]
    assert thought.thinking is not None
    assert "75 is not of type 'string'" in thought.thinking.thought
    assert thought.parent_step_id == chain.steps[1].id
    assert [step.type for step in chain.steps].count(StepType.SYNTHESIS) == 1


@pytest.mark.parametrize("retries", [0, 2])
async def test_answers_that_never_match_fail_invalid_output_after_one_call_plus_retries(
    fake_llm: FakeLLMServer, tmp_path: Path, retries: int
) -> None:
    runtime = _runtime(fake_llm, tmp_path, output_retries=retries)
    fake_llm.script(
        PLAIN_MODEL,
        *[Reply.text(f"The capital is Paris ({n}).") for n in range(retries)],
        Reply.text('{"city": "Paris"}'),
    )

    events, chain = await _run(runtime, AgentSpec(response_format=CITY))

    failed = _failed(events)
    assert failed.error_code is ErrorCode.INVALID_OUTPUT
    assert len(fake_llm.requests) == 1 + retries
    # The message holds the last answer's errors.
    assert "at $: 'population' is a required property" in failed.error_message
    assert failed.details == {
        "attempts": 1 + retries,
        "errors": ["at $: 'population' is a required property"],
    }
    assert chain.status is ChainStatus.FAILED
    assert len(_thoughts(chain)) == retries
    assert all("is not JSON" in thought for thought in _thoughts(chain))


async def test_the_text_format_checks_the_final_answer_and_reminds_in_its_own_format(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path, mode="text")
    fake_llm.script(
        PLAIN_MODEL,
        Reply.text(
            'Thought: Add the districts.\nAction: calculator\nAction Input: {"expression": '
            '"2051325 + 51325"}'
        ),
        Reply.text('Thought: Done.\nFinal Answer: {"city": "Paris", "population": "many"}'),
        Reply.text(f"Thought: Fixed.\nFinal Answer: {json.dumps(PARIS)}"),
    )

    events, chain = await _run(runtime, AgentSpec(response_format=CITY))

    assert _completed(events).output == PARIS
    first, _, third = fake_llm.requests
    assert first.body["messages"][0]["content"].endswith(json.dumps(CITY))
    assert "Final Answer must be a single JSON value" in first.body["messages"][0]["content"]
    assert third.body["messages"][-1]["content"].startswith(
        "Observation: your Final Answer does not match the required JSON Schema:\n"
        "- at $.population: 'many' is not of type 'integer'"
    )
    synthesis = chain.steps[-1].synthesis
    assert synthesis is not None
    # The answer rests on the calculator's result and the answering call.
    assert len(synthesis.sources) == 2


async def test_a_schema_that_cannot_be_checked_fails_the_task_before_any_call(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path)

    events, _ = await _run(runtime, AgentSpec(response_format={"type": "no-such-type"}))

    failed = _failed(events)
    assert failed.error_code is ErrorCode.INVALID_OUTPUT
    assert "not a usable JSON Schema" in failed.error_message
    assert fake_llm.requests == []


async def test_a_reference_to_nowhere_fails_invalid_output_when_it_is_first_needed(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path)
    fake_llm.script(PLAIN_MODEL, Reply.text("{}"))

    events, _ = await _run(runtime, AgentSpec(response_format={"$ref": "#/$defs/missing"}))

    failed = _failed(events)
    assert failed.error_code is ErrorCode.INVALID_OUTPUT
    assert "cannot be applied" in failed.error_message


def test_chain_completed_carries_the_output_and_reads_events_stored_before_it() -> None:
    stored = ChainCompletedEvent.model_validate(
        {
            "task_id": "t",
            "chain_id": "00000000-0000-0000-0000-000000000001",
            "answer": "x",
            "metrics": {},
        }
    )
    assert (stored.output, stored.stop_reason) == (None, None)
    event = stored.model_copy(update={"output": PARIS})
    restored = chain_event_adapter.validate_json(event.model_dump_json())
    assert isinstance(restored, ChainCompletedEvent)
    assert restored.output == PARIS


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("Paris", "the answer is not JSON"),
        ('{"city": "Paris", "population": NaN}', "NaN is not a JSON value"),
        ('{"city": "Paris", "population": 1e999}', "1e999 is out of range"),
        ("```json\n[1, 2\n```", "the answer is not JSON"),
        ('{"city": "Paris", "population": 1, "mayor": "x"}', "Additional properties"),
    ],
)
def test_answers_that_are_not_matching_json_are_described(answer: str, problem: str) -> None:
    check = OutputFormat(CITY).check(answer)
    assert not check.valid
    assert problem in check.errors[0]


@pytest.mark.parametrize(
    "answer",
    [json.dumps(PARIS), f"  ```\n{json.dumps(PARIS)}\n```  ", f"```JSON\n{json.dumps(PARIS)}\n```"],
)
def test_a_fence_around_the_answer_is_tolerated(answer: str) -> None:
    check = OutputFormat(CITY).check(answer)
    assert check.valid
    assert check.value == PARIS


def test_the_schema_is_checked_by_the_validator_of_its_dialect() -> None:
    # Draft 4's boolean `exclusiveMaximum` (a number since draft 6).
    draft4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "number",
        "maximum": 10,
        "exclusiveMaximum": True,
    }
    assert not OutputFormat(draft4).check("10").valid
    assert OutputFormat(draft4).check("9.5").valid
    # The same schema is no 2020-12 schema at all.
    with pytest.raises(ValueError, match="is not of type 'number'"):
        OutputFormat({key: value for key, value in draft4.items() if key != "$schema"})
    with pytest.raises(ValueError, match="must be a string"):
        OutputFormat({"$schema": ["a"], "type": "object"})
