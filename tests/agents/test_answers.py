"""What a completed task answers, on the real ReAct agent: the offline demo model's everyday
arithmetic and its plain "could not", the answer `chain_completed` carries, and a failed tool
result never being the answer of a completed task."""

import json
import math
import re
from pathlib import Path

import pytest

from app.agents import AgentRuntime, AgentTask, RuntimeSettings
from app.agents.base import ToolCallingMode
from app.agents.spec import AgentSpec
from app.chain import (
    ChainCompletedEvent,
    ChainEvent,
    ChainFailedEvent,
    ChainStatus,
    ErrorCode,
    ReasoningChain,
    StepType,
)
from app.config import Settings
from app.llm.demo_brain import PLAIN_ANSWER
from app.tools.schemas import applied_validator
from tests.factories import fake_deployment, runtime_for
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall

MODES: list[ToolCallingMode] = ["native", "text"]


@pytest.fixture(scope="module", params=MODES)
def demo(request: pytest.FixtureRequest) -> AgentRuntime:
    """The runtime as `omniforge run` builds it with no configuration: the demo model, in
    each tool-calling mode."""
    settings = RuntimeSettings.model_validate(Settings(models_file=None, default_model="demo"))
    return AgentRuntime.build(settings, mode=request.param)


async def _ask(
    runtime: AgentRuntime, question: str, tools: list[str] | None = None
) -> tuple[list[ChainEvent], ReasoningChain]:
    run = runtime.agent.start(AgentTask(input=question, tools=tools))
    events = [event async for event in run.events()]
    return events, run.chain


def _answer(events: list[ChainEvent], chain: ReasoningChain) -> str:
    """The completed chain's answer, as `chain_completed` carries it; it must be the chain's
    own conclusion."""
    completed = events[-2]
    assert isinstance(completed, ChainCompletedEvent), events[-2]
    synthesis = chain.steps[-1].synthesis
    assert synthesis is not None
    assert completed.answer == synthesis.conclusion
    return synthesis.conclusion


def _calculator_calls(chain: ReasoningChain) -> list[str]:
    return [
        step.tool_call.arguments["expression"]
        for step in chain.steps
        if step.tool_call is not None and step.tool_call.tool_name == "calculator"
    ]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is the square root of 2 times pi?", math.sqrt(2) * math.pi),
        ("what is 15% of 80", 12),
        ("What is 15 percent of 80?", 12),
        ("What is 6 times 7?", 42),
        ("What is 2 plus 3 minus 10?", -5),
        ("What is 10 divided by 4?", 2.5),
        ("What is 2 to the power of 10?", 1024),
        ("What is 3 squared plus 4 cubed?", 73),
        ("What is sqrt 16 times 2?", 8),
        ("What is the square root of (2 times pi)?", math.sqrt(2 * math.pi)),
        ("What is the cube root of 27?", 3),
        ("What is pi?", math.pi),
        ("What is e squared?", math.e**2),
        ("What is 80 plus 15%?", 92),
        ("What is 1,000 times 3?", 3000),
    ],
)
async def test_the_demo_answers_everyday_arithmetic_correctly(
    demo: AgentRuntime, question: str, expected: float
) -> None:
    events, chain = await _ask(demo, question)

    answer = _answer(events, chain)
    match = re.fullmatch(r"(?P<expression>.+) = (?P<value>-?\d+(?:\.\d+)?)\.", answer)
    assert match is not None, answer
    assert round(float(match["value"]), 4) == round(expected, 4)
    assert _calculator_calls(chain) == [match["expression"]]


async def test_the_root_takes_the_number_right_after_it(demo: AgentRuntime) -> None:
    events, chain = await _ask(demo, "square root of 2 times pi")

    assert _answer(events, chain) == "sqrt(2) * pi = 4.44288293815837."


@pytest.mark.parametrize("question", ["What is two plus two?", "What is the square root of x?"])
async def test_arithmetic_it_cannot_read_gets_a_plain_could_not(
    demo: AgentRuntime, question: str
) -> None:
    events, chain = await _ask(demo, question)

    answer = _answer(events, chain)
    assert answer.startswith(f"I could not work this out: I cannot read “{question}” as arithmetic")
    assert _calculator_calls(chain) == []
    assert chain.status is ChainStatus.COMPLETED


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        (
            "What is 1 divided by 0?",
            "I could not work out 1 / 0: the calculator tool reported division by zero.",
        ),
        (
            "What is the square root of -4?",
            "I could not work out sqrt(-4): the calculator tool reported math domain error: "
            "sqrt(-4) is undefined for real numbers.",
        ),
        (
            "What is f(2)?",
            "I could not work out f(2): the calculator tool did not accept it "
            "(function 'f' is not supported).",
        ),
    ],
)
async def test_a_calculator_failure_is_answered_with_could_not_never_its_error(
    demo: AgentRuntime, question: str, answer: str
) -> None:
    events, chain = await _ask(demo, question)

    [failed] = [s.tool_result for s in chain.steps if s.tool_result and not s.tool_result.success]
    given = _answer(events, chain)
    assert given == answer
    assert failed.error is not None
    assert given != failed.error
    assert f"Error ({failed.error_code})" not in given


async def test_without_the_calculator_it_says_it_cannot_calculate(demo: AgentRuntime) -> None:
    events, chain = await _ask(demo, "What is 6 times 7?", ["current_time"])

    assert _answer(events, chain) == (
        "I could not work this out: the calculator tool is not available to this task."
    )


async def test_a_question_with_files_attached_is_answered_the_files_listing_being_context(
    demo: AgentRuntime,
) -> None:
    attached = "0b6f0e64-2d8a-4d8e-9a43-3c7b1d4c9f10: notes.txt (text/plain, 12 bytes)"
    run = demo.agent.start(AgentTask(input="What is 6*7?", attachments=[attached]))
    events = [event async for event in run.events()]

    assert _answer(events, run.chain) == "6 * 7 = 42."
    assert _calculator_calls(run.chain) == ["6 * 7"]


# The README's `support.yaml` agent.
SUPPORT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}
# Most of what a schema can ask for: the answer goes where it fits, the rest is made up.
TICKET_SCHEMA = {
    "$defs": {"level": {"type": "integer", "minimum": 1, "maximum": 5}},
    "type": "object",
    "properties": {
        "category": {"enum": ["billing", "technical"]},
        "version": {"const": 2},
        "value": {"type": "number"},
        "summary": {"type": "string", "minLength": 3, "maxLength": 200},
        "priority": {"$ref": "#/$defs/level", "default": 3},
        "confidence": {"type": "number", "exclusiveMinimum": 0.5, "maximum": 1},
        "customer": {
            "type": "object",
            "properties": {
                "email": {"type": "string", "format": "email"},
                "since": {"type": "string", "format": "date"},
                "plan": {"type": "string", "examples": ["pro"]},
            },
            "required": ["email", "since", "plan"],
            "additionalProperties": False,
        },
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "uniqueItems": True},
        "lines": {
            "type": "array",
            "items": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 10}}},
            "minItems": 1,
        },
        "urgent": {"type": "boolean"},
        "note": {"type": ["null", "string"]},
        "optional": {"type": "string"},
    },
    "required": [
        "category", "version", "value", "summary", "priority", "confidence", "customer", "tags",
        "lines", "urgent", "note",
    ],
    "additionalProperties": False,
}  # fmt: skip


async def _structured(
    runtime: AgentRuntime, schema: dict[str, object], question: str
) -> tuple[object, str]:
    """The output and answer of a task of an agent with `schema` as its response_format,
    checked against the schema."""
    agent = runtime.agent_for(AgentSpec(response_format=schema))
    run = agent.start(AgentTask(input=question))
    events = [event async for event in run.events()]
    completed = events[-2]
    assert isinstance(completed, ChainCompletedEvent), completed
    assert completed.answer is not None
    assert json.loads(completed.answer) == completed.output
    assert list(applied_validator(schema).iter_errors(completed.output)) == []
    return completed.output, completed.answer


async def test_with_the_readmes_response_format_the_demo_answers_in_it(
    demo: AgentRuntime,
) -> None:
    arithmetic, _ = await _structured(demo, SUPPORT_SCHEMA, "What is 6 times 7?")
    plain, _ = await _structured(demo, SUPPORT_SCHEMA, "Hello")

    assert arithmetic == {"answer": "6 * 7 = 42."}
    assert plain == {"answer": PLAIN_ANSWER}


async def test_with_a_rich_response_format_the_demo_answers_json_built_from_it(
    demo: AgentRuntime,
) -> None:
    output, _ = await _structured(demo, TICKET_SCHEMA, "What is 6 times 7?")

    assert isinstance(output, dict)
    assert (output["category"], output["version"]) == ("billing", 2)
    assert (output["value"], output["summary"]) == (42, "6 * 7 = 42.")
    assert output["priority"] == 3
    assert output["customer"]["plan"] == "pro"
    assert "optional" not in output


async def test_a_response_format_that_is_no_object_is_answered_too(demo: AgentRuntime) -> None:
    number, _ = await _structured(demo, {"type": "number"}, "What is 6 times 7?")
    words, _ = await _structured(
        demo, {"type": "array", "items": {"type": "string"}, "minItems": 1}, "What is 6 times 7?"
    )

    assert number == 42
    assert words == ["6 * 7 = 42."]


def _scripted(server: FakeLLMServer, tmp_path: Path) -> AgentRuntime:
    deployment = fake_deployment(server, "echo-model", native_tools=True)
    return runtime_for(tmp_path, [deployment], default_model="echo-model", mode="native")


@pytest.mark.parametrize(
    "echo", ["Error (tool_error): division by zero", "division by zero", "  division by zero\n"]
)
async def test_a_final_answer_that_only_echoes_a_tool_error_fails_the_chain(
    fake_llm: FakeLLMServer, tmp_path: Path, echo: str
) -> None:
    fake_llm.script(
        "echo-model",
        Reply.tool_calls([ToolCall("calculator", {"expression": "1 / 0"})]),
        Reply.text(echo),
    )

    events, chain = await _ask(_scripted(fake_llm, tmp_path), "What is 1 / 0?")

    failed = events[-2]
    assert isinstance(failed, ChainFailedEvent)
    assert failed.error_code is ErrorCode.TOOL_ERROR
    assert failed.error_message == (
        "the model's final answer was only the error of its failed calculator call: "
        "division by zero"
    )
    assert all(step.type is not StepType.SYNTHESIS for step in chain.steps)


async def test_an_answer_that_explains_a_tool_failure_completes(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.script(
        "echo-model",
        Reply.tool_calls([ToolCall("calculator", {"expression": "1 / 0"})]),
        Reply.text("1 / 0 has no value: division by zero is undefined."),
    )

    events, chain = await _ask(_scripted(fake_llm, tmp_path), "What is 1 / 0?")

    assert _answer(events, chain) == "1 / 0 has no value: division by zero is undefined."
