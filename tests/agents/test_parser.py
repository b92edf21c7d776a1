"""parse_react reads what models actually write in text-mode ReAct replies."""

import pytest

from app.agents.parser import ReActStep, parse_react

NESTED = {"filter": {"any": [{"tag": "a", "range": {"from": 1, "to": [2, 3]}}, {"tag": None}]}}
NESTED_JSON = (
    '{"filter": {"any": [{"tag": "a", "range": {"from": 1, "to": [2, 3]}}, {"tag": null}]}}'
)


def test_standard_thought_action_and_input_are_parsed() -> None:
    step = parse_react(
        "Thought: I need the time in Paris.\n"
        "Action: current_time\n"
        'Action Input: {"timezone": "Paris"}'
    )

    assert step == ReActStep(
        thought="I need the time in Paris.",
        action="current_time",
        action_input={"timezone": "Paris"},
    )


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("Action: web-search", "web-search"),
        ("Action: files.read", "files.read"),
        ("Action: files.read.", "files.read"),
        ("Action: `web-search`", "web-search"),
        ("Action: my_tool_2", "my_tool_2"),
    ],
)
def test_hyphenated_and_dotted_tool_names_are_kept_whole(line: str, name: str) -> None:
    step = parse_react(f'Thought: go\n{line}\nAction Input: {{"q": "x"}}')

    assert step.action == name
    assert step.action_input == {"q": "x"}


@pytest.mark.parametrize(
    "action_input",
    [
        NESTED_JSON,
        f"```json\n{NESTED_JSON}\n```",
        f"```\n{NESTED_JSON}\n```",
        f"\n```json\n{NESTED_JSON}\n```\nI will wait for the result.",
        f"{NESTED_JSON} and then I will summarise it.",
    ],
    ids=["plain", "json-fence", "bare-fence", "fence-then-text", "trailing-text"],
)
def test_nested_json_input_is_parsed_exactly(action_input: str) -> None:
    step = parse_react(f"Thought: search\nAction: search\nAction Input: {action_input}")

    assert step.action == "search"
    assert step.action_input == NESTED


@pytest.mark.parametrize(
    "reply",
    [
        '**Thought:** hm\n**Action:** lookup\n**Action Input:** {"a": 1}',
        '**Thought**: hm\n**Action**: lookup\n**Action Input**: {"a": 1}',
        '__Thought__: hm\n__Action__: lookup\n__Action Input__: {"a": 1}',
        'THOUGHT: hm\naction: lookup\nACTION INPUT: {"a": 1}',
        'thought: hm\nAction: lookup\naction input: {"a": 1}',
    ],
    ids=["bold-colon-inside", "bold-colon-outside", "underscores", "upper", "mixed"],
)
def test_markdown_bold_and_any_case_labels_are_recognised(reply: str) -> None:
    assert parse_react(reply) == ReActStep(thought="hm", action="lookup", action_input={"a": 1})


def test_call_syntax_without_action_input_takes_the_arguments_from_the_call() -> None:
    step = parse_react('Thought: add\nAction: calculator({"expression": "1+1"})')

    assert step.action == "calculator"
    assert step.action_input == {"expression": "1+1"}


def test_action_without_input_gets_empty_arguments() -> None:
    step = parse_react("Thought: check\nAction: current_time")

    assert step.action == "current_time"
    assert step.action_input == {}


@pytest.mark.parametrize(
    "action_input",
    ["Europe/Paris", '"Europe/Paris"', "'Europe/Paris'", "  Europe/Paris  "],
)
def test_bare_string_input_is_returned_as_text_without_quotes(action_input: str) -> None:
    step = parse_react(f"Action: current_time\nAction Input: {action_input}")

    assert step.action == "current_time"
    assert step.action_input == "Europe/Paris"


@pytest.mark.parametrize(
    "raw",
    ['{"expression": "1+1",', "{expression: 1+1}", '{"a": [1, 2}'],
)
def test_invalid_json_input_is_returned_as_the_raw_text(raw: str) -> None:
    step = parse_react(f"Action: calculator\nAction Input: {raw}")

    assert step.action == "calculator"
    assert step.action_input == raw
    assert step.error is None


def test_hallucinated_observation_and_everything_after_it_are_ignored() -> None:
    reply = (
        "Thought: add them\n"
        "Action: calculator\n"
        'Action Input: {"expression": "2+2"}\n'
        "Observation: 4\n"
        "Thought: I know it now\n"
        "Final Answer: 4"
    )

    step = parse_react(reply)

    assert step == ReActStep(
        thought="add them", action="calculator", action_input={"expression": "2+2"}
    )


def test_final_answer_keeps_every_line() -> None:
    step = parse_react("Thought: done\nFinal Answer: Line one.\nLine two: more.\n\n- a bullet")

    assert step == ReActStep(
        thought="done", final_answer="Line one.\nLine two: more.\n\n- a bullet"
    )


def test_action_before_final_answer_wins() -> None:
    step = parse_react("Thought: t\nAction: lookup\nAction Input: {}\nFinal Answer: too early")

    assert step.action == "lookup"
    assert step.action_input == {}
    assert step.final_answer is None


def test_final_answer_before_action_wins() -> None:
    step = parse_react("Thought: t\nFinal Answer: 42\nAction: lookup\nAction Input: {}")

    assert step.final_answer == "42"
    assert step.action is None
    assert step.action_input is None


@pytest.mark.parametrize(
    "reply",
    ["Paris is the capital of France.", "It is 3 pm.\nEnjoy the afternoon!"],
)
def test_reply_without_markers_is_the_final_answer(reply: str) -> None:
    assert parse_react(f"  {reply}\n") == ReActStep(final_answer=reply)


@pytest.mark.parametrize("reply", ["", "   ", "\n\t\n"])
def test_empty_reply_is_an_error(reply: str) -> None:
    step = parse_react(reply)

    assert step.error is not None
    assert step.action is None
    assert step.final_answer is None


def test_thought_without_action_or_final_answer_is_an_error() -> None:
    step = parse_react("Thought: I should look something up.")

    assert step.thought == "I should look something up."
    assert step.action is None
    assert step.final_answer is None
    assert step.error is not None


def test_action_label_without_a_tool_name_is_an_error() -> None:
    step = parse_react('Thought: t\nAction:\nAction Input: {"a": 1}')

    assert step.action is None
    assert step.error is not None


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            '```\nThought: t\nAction: lookup\nAction Input: {"a": [1, {"b": 2}]}\n```',
            ReActStep(thought="t", action="lookup", action_input={"a": [1, {"b": 2}]}),
        ),
        (
            "```text\nThought: t\nFinal Answer: done\n```",
            ReActStep(thought="t", final_answer="done"),
        ),
    ],
    ids=["action", "final-answer"],
)
def test_reply_wrapped_in_a_code_fence_is_unwrapped(reply: str, expected: ReActStep) -> None:
    assert parse_react(reply) == expected


def test_code_block_answer_without_markers_keeps_its_fence() -> None:
    reply = "```python\nprint('hi')\n```"

    assert parse_react(reply) == ReActStep(final_answer=reply)
