"""The offline demo model, called through LiteLLM like any provider: deterministic, tool-using."""

import json
from typing import Any

import pytest

from app.agents import parse_react
from app.agents.prompts import text_system_prompt
from app.llm import DEMO_MODEL, LLMDelta, LLMGateway, LLMRequest, LLMResponse, load_model_list
from app.llm.demo_brain import PLAIN_ANSWER
from app.llm.litellm_env import litellm
from app.tools.builtin import builtin_tools
from app.tools.builtin.calculator import evaluate

TOOLS = [tool.definition.to_openai_tool() for tool in builtin_tools()]


@pytest.fixture(scope="module")
def gateway() -> LLMGateway:
    return LLMGateway(load_model_list(None))


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


async def test_arithmetic_is_answered_by_calling_the_calculator(gateway: LLMGateway) -> None:
    response = await gateway.complete(
        LLMRequest(model=DEMO_MODEL, messages=_user("What is 17 * 23 + 4?"), tools=TOOLS)
    )
    [call] = response.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("calculator", {"expression": "17 * 23 + 4"})
    assert response.finish_reason == "tool_calls"
    assert response.content == "I will use the calculator to evaluate 17 * 23 + 4."


@pytest.mark.parametrize(
    ("question", "expression"),
    [
        ("square root of 2 times pi", "sqrt(2) * pi"),
        ("What is sqrt(2) times pi?", "sqrt(2) * pi"),
        ("What is the square root of (2 times pi)?", "sqrt(2 * pi)"),
        ("what is 15% of 80", "15 * 80 / 100"),
        ("What is 15 percent of 80?", "15 * 80 / 100"),
        ("2 times 15% of 80", "2 * (15 * 80 / 100)"),
        ("What is 80 plus 15%?", "80 * (1 + 15 / 100)"),
        ("What is 17 % 5?", "17 % 5"),
        ("What is 6 multiplied by 7?", "6 * 7"),
        ("What is 3 x 4?", "3 * 4"),
        ("What is 7 plus 2 minus 10?", "7 + 2 - 10"),
        ("What is 10 divided by 4?", "10 / 4"),
        ("What is 2 to the power of 10?", "2 ** 10"),
        ("What's 2^10?", "2 ** 10"),
        ("What is 3 squared plus 4 cubed?", "3 ** 2 + 4 ** 3"),
        ("What is the cube root of 27?", "cbrt(27)"),
        ("What is 2 pi?", "2 * pi"),
        ("What is e squared?", "e ** 2"),
        ("What is pi?", "pi"),
        ("What is 1,000 times 3?", "1000 * 3"),
        ("What is max(1,000)?", "max(1, 0)"),
        ("What is minus 5 plus 3?", "-5 + 3"),
    ],
)
async def test_everyday_arithmetic_becomes_a_calculator_expression(
    gateway: LLMGateway, question: str, expression: str
) -> None:
    response = await gateway.complete(
        LLMRequest(model=DEMO_MODEL, messages=_user(question), tools=TOOLS)
    )
    [call] = response.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("calculator", {"expression": expression})


@pytest.mark.parametrize(
    "question",
    [
        "What time is it in UTC+2?",
        "What is the current time in Europe/Paris?",
        "What time is it in Tokyo on 2026-07-01 at 10:30?",
    ],
)
async def test_places_dates_and_clock_times_are_not_arithmetic(
    gateway: LLMGateway, question: str
) -> None:
    response = await gateway.complete(
        LLMRequest(model=DEMO_MODEL, messages=_user(question), tools=TOOLS)
    )
    assert [call.name for call in response.tool_calls] == ["current_time"]


@pytest.mark.parametrize(
    "question", ["What is two plus two?", "What is 5 plus?", "square root of banana"]
)
async def test_arithmetic_it_cannot_read_is_answered_plainly(
    gateway: LLMGateway, question: str
) -> None:
    response = await gateway.complete(
        LLMRequest(model=DEMO_MODEL, messages=_user(question), tools=TOOLS)
    )
    assert response.tool_calls == []
    assert response.content == (
        f"I could not work this out: I cannot read “{question}” as arithmetic (I read numbers "
        "in digits with + - * / ^ % and parentheses, plus, minus, times, divided by, to the "
        "power of, squared, cubed, square root of, percent of, pi and e)."
    )


def _after_one_call(question: str, expression: str, observation: str) -> list[dict[str, object]]:
    call = {"name": "calculator", "arguments": json.dumps({"expression": expression})}
    return [
        *_user(question),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": call}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": observation},
    ]


@pytest.mark.parametrize(
    ("observation", "answer"),
    [
        (
            "Error (tool_error): division by zero",
            "I could not work out 1 / 0: the calculator tool reported division by zero.",
        ),
        (
            "Error (invalid_arguments): invalid arguments for calculator: expression: is not a "
            "valid arithmetic expression: invalid syntax",
            "I could not work out 1 / 0: the calculator tool did not accept it (is not a valid "
            "arithmetic expression: invalid syntax).",
        ),
        (
            "Error (timeout): calculator did not finish within 5 s",
            "I could not work out 1 / 0: the calculator tool took too long.",
        ),
        (
            "Error (rate_limited): calculator: 0 calls left this minute",
            "I could not work out 1 / 0: the calculator call was refused or failed (rate_limited).",
        ),
    ],
)
async def test_a_failed_calculator_call_is_answered_with_could_not(
    gateway: LLMGateway, observation: str, answer: str
) -> None:
    messages = _after_one_call("What is 1 / 0?", "1 / 0", observation)
    final = await gateway.complete(LLMRequest(model=DEMO_MODEL, messages=messages, tools=TOOLS))
    assert final.tool_calls == []
    assert final.content == answer


@pytest.mark.parametrize(
    ("question", "place"),
    [
        ("What time is it in Tokyo?", "Tokyo"),
        ("what's the time in New York right now", "New York"),
        ("What is the current time in Europe/Paris?", "Europe/Paris"),
        ("What time is it?", "UTC"),
    ],
)
async def test_time_questions_call_current_time_with_the_place(
    gateway: LLMGateway, question: str, place: str
) -> None:
    response = await gateway.complete(
        LLMRequest(model=DEMO_MODEL, messages=_user(question), tools=TOOLS)
    )
    [call] = response.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("current_time", {"timezone": place})


async def test_a_task_needing_both_tools_calls_both_at_once(gateway: LLMGateway) -> None:
    response = await gateway.complete(
        LLMRequest(
            model=DEMO_MODEL,
            messages=_user("What is 2 plus 3 and what time is it in Sydney?"),
            tools=TOOLS,
        )
    )
    assert [(c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("calculator", {"expression": "2 + 3"}),
        ("current_time", {"timezone": "Sydney"}),
    ]


async def test_tool_results_are_turned_into_a_final_answer(gateway: LLMGateway) -> None:
    first = await gateway.complete(
        LLMRequest(model=DEMO_MODEL, messages=_user("What is 17 * 23 + 4?"), tools=TOOLS)
    )
    [call] = first.tool_calls
    messages = [
        *_user("What is 17 * 23 + 4?"),
        {
            "role": "assistant",
            "content": first.content,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": call.id,
            "content": json.dumps({"expression": "17 * 23 + 4", "result": 395}),
        },
    ]
    final = await gateway.complete(LLMRequest(model=DEMO_MODEL, messages=messages, tools=TOOLS))
    assert final.tool_calls == []
    assert final.content == "17 * 23 + 4 = 395."


async def test_anything_else_gets_a_plain_answer_explaining_the_demo(gateway: LLMGateway) -> None:
    response = await gateway.complete(
        LLMRequest(model=DEMO_MODEL, messages=_user("Write me a poem"), tools=TOOLS)
    )
    assert response.content == PLAIN_ANSWER
    assert "offline demo model" in PLAIN_ANSWER
    assert "OMNIFORGE_MODELS_FILE" in PLAIN_ANSWER
    assert response.tool_calls == []


async def test_it_speaks_the_text_react_format_when_prompted_for_it(gateway: LLMGateway) -> None:
    system = text_system_prompt([tool.definition for tool in builtin_tools()])
    messages = [{"role": "system", "content": system}, *_user("What is 6 * 7?")]

    first = await gateway.complete(LLMRequest(model=DEMO_MODEL, messages=messages))
    step = parse_react(first.content or "")
    assert (step.action, step.action_input) == ("calculator", {"expression": "6 * 7"})

    messages += [
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": 'Observation: {"expression": "6 * 7", "result": 42}'},
    ]
    second = await gateway.complete(LLMRequest(model=DEMO_MODEL, messages=messages))
    assert parse_react(second.content or "").final_answer == "6 * 7 = 42."


async def test_in_the_text_format_a_failed_call_is_answered_with_could_not(
    gateway: LLMGateway,
) -> None:
    system = text_system_prompt([tool.definition for tool in builtin_tools()])
    messages = [
        {"role": "system", "content": system},
        *_user("What is 1 divided by 0?"),
        {"role": "assistant", "content": "Thought: ...\nAction: calculator"},
        {"role": "user", "content": "Observation: Error (tool_error): division by zero"},
    ]
    reply = await gateway.complete(LLMRequest(model=DEMO_MODEL, messages=messages))
    assert parse_react(reply.content or "").final_answer == (
        "I could not work out 1 / 0: the calculator tool reported division by zero."
    )


async def test_it_is_deterministic_and_free_with_usage_from_a_real_tokenizer(
    gateway: LLMGateway,
) -> None:
    request = LLMRequest(model=DEMO_MODEL, messages=_user("What is 1 + 1?"), tools=TOOLS)
    first, second = await gateway.complete(request), await gateway.complete(request)

    assert (first.content, first.tool_calls) == (second.content, second.tool_calls)
    assert first.input_tokens == litellm.token_counter(messages=request.messages, tools=TOOLS)
    expected_output = litellm.token_counter(
        text=(first.content or "") + "calculator" + json.dumps({"expression": "1 + 1"})
    )
    assert first.output_tokens == expected_output
    assert first.cost_usd == 0
    assert not first.unpriced
    assert (first.model, first.deployment, first.provider) == ("demo", "demo", "omniforge_demo")


async def test_it_streams(gateway: LLMGateway) -> None:
    events = [
        e
        async for e in gateway.stream(
            LLMRequest(model=DEMO_MODEL, messages=_user("Hello"), tools=TOOLS)
        )
    ]
    final = events[-1]
    assert isinstance(final, LLMResponse)
    assert "".join(e.text for e in events if isinstance(e, LLMDelta)) == PLAIN_ANSWER
    assert final.content == PLAIN_ANSWER
    assert final.input_tokens > 0
    assert final.output_tokens > 0


async def test_nesting_deeper_than_anyone_writes_is_read_only_as_deep_as_it_goes(
    gateway: LLMGateway,
) -> None:
    question = "(" * 2000 + "1 + 1" + ")" * 2000
    response = await gateway.complete(
        LLMRequest(model=DEMO_MODEL, messages=_user(question), tools=TOOLS)
    )
    [call] = response.tool_calls
    expression = json.loads(call.arguments)["expression"]
    assert expression.strip("()") == "1 + 1"
    assert expression.count("(") < 100
    assert evaluate(expression) == 2


def _asked_for(schema: dict[str, object]) -> dict[str, object]:
    """An OpenAI `response_format`, as a deployment that enforces schemas is sent it."""
    return {"type": "json_schema", "json_schema": {"name": "final_answer", "schema": schema}}


async def test_its_final_answer_has_the_shape_of_a_response_format(gateway: LLMGateway) -> None:
    schema = {
        "type": "object",
        "properties": {
            "kind": {"enum": ["math", "other"], "default": "math"},
            "result": {"type": "integer", "minimum": 0},
            "explanation": {"type": "string"},
            "unit": {"type": ["string", "null"]},
            "extra": {"type": "string"},
        },
        "required": ["kind", "result", "explanation", "unit"],
        "additionalProperties": False,
    }
    messages = _after_one_call("What is 6 * 7?", "6 * 7", '{"expression": "6 * 7", "result": 42}')

    first = await gateway.complete(
        LLMRequest(model=DEMO_MODEL, messages=_user("What is 6 * 7?"), tools=TOOLS)
    )
    final = await gateway.complete(
        LLMRequest(
            model=DEMO_MODEL, messages=messages, tools=TOOLS, response_format=_asked_for(schema)
        )
    )

    assert first.tool_calls  # a tool-calling turn stays one
    assert json.loads(final.content or "") == {
        "kind": "math",
        "result": 42,
        "explanation": "6 * 7 = 42.",
        "unit": None,
    }


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string", "maxLength": 8}, "6 * 7 =…"),
        ({"type": "integer", "exclusiveMinimum": 50}, 51),
        ({"type": "number", "minimum": -5, "maximum": -2}, -2),
        ({"type": "integer", "minimum": 1, "multipleOf": 5}, 5),
        ({"type": "string", "pattern": "^[A-Z]+$", "examples": ["OK"]}, "OK"),
        ({"anyOf": [{"type": "null"}, {"type": "string"}]}, "6 * 7 = 42."),
        ({"oneOf": [{"const": "yes"}, {"const": "no"}]}, "yes"),
        ({"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "number"}]}, [False, 42]),
        (
            {"allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}]},
            {"a": "6 * 7 = 42."},
        ),
        (
            {
                "$defs": {
                    "node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}
                },
                "$ref": "#/$defs/node",
                "required": ["next"],
            },
            {"next": {}},
        ),
    ],
)
async def test_a_response_format_is_filled_in_from_its_schema(
    gateway: LLMGateway, schema: dict[str, object], expected: object
) -> None:
    messages = _after_one_call("What is 6 * 7?", "6 * 7", '{"expression": "6 * 7", "result": 42}')

    final = await gateway.complete(
        LLMRequest(
            model=DEMO_MODEL, messages=messages, tools=TOOLS, response_format=_asked_for(schema)
        )
    )

    assert json.loads(final.content or "") == expected
