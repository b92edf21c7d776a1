"""What a completed task answers, on the real ReAct agent: the offline demo model's everyday
arithmetic and its plain "could not", the answer `chain_completed` carries, and a failed tool
result never being the answer of a completed task."""

import math
import re
from pathlib import Path

import pytest

from app.agents import AgentRuntime, AgentTask, RuntimeSettings
from app.agents.react import ToolCallingMode
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
