"""Withheld tool steps in the prompts of later LLM calls: what a reader's view shows of the
messages an LLM call step recorded."""

import json
from typing import Any
from uuid import uuid4

from app.chain import (
    ReasoningStep,
    StepType,
    ToolCallInfo,
    ToolResultInfo,
    ToolType,
    VisibilityConfig,
    VisibilityLevel,
)
from app.security.prompts import HIDDEN, WithheldContent
from app.security.visibility import ReaderView, StepFacts, VisibilityPolicy

FULL, SUMMARY = VisibilityLevel.FULL, VisibilityLevel.SUMMARY
MARKER = "ZEBRA-7731-payroll-total"
ARGUMENTS = {"account": "ACME-PAYROLL", "month": "2026-11"}
RESULT = {"account": "ACME-PAYROLL", "total": MARKER}
OBSERVATION = json.dumps(RESULT, ensure_ascii=False, sort_keys=True)

Stored = tuple[str, StepFacts]


def reader(policy: dict[str, Any], *, full_access: bool = False) -> ReaderView:
    return ReaderView(
        VisibilityPolicy.model_validate(policy),
        roles=frozenset({"member"}),
        full_access=full_access,
        sensitive_fields=(),
    )


def tool_steps(
    *, tool: str = "payroll", summary: str = "looked up the payroll", result: Any = None
) -> list[Stored]:
    call = ReasoningStep(
        type=StepType.TOOL_CALL,
        step_number=3,
        tool_call=ToolCallInfo(tool_type=ToolType.DATABASE, tool_name=tool, arguments=ARGUMENTS),
        visibility=VisibilityConfig(level=FULL, summary=f"Calling {tool}"),
    )
    outcome = ReasoningStep(
        type=StepType.TOOL_RESULT,
        step_number=4,
        parent_step_id=call.id,
        tool_result=ToolResultInfo(
            correlation_id=call.tool_call.correlation_id if call.tool_call else uuid4(),
            success=True,
            result=RESULT if result is None else result,
            duration_ms=2.0,
        ),
        visibility=VisibilityConfig(level=FULL, summary=summary),
    )
    return [
        (call.model_dump_json(), StepFacts(StepType.TOOL_CALL, ToolType.DATABASE, tool, FULL)),
        (
            outcome.model_dump_json(),
            StepFacts(StepType.TOOL_RESULT, ToolType.DATABASE, tool, FULL),
        ),
    ]


def llm_call(messages: list[dict[str, Any]]) -> Stored:
    step = ReasoningStep(
        type=StepType.TOOL_CALL,
        step_number=5,
        tool_call=ToolCallInfo(
            tool_type=ToolType.LLM,
            tool_name="llm",
            arguments={"model": "m", "messages": messages, "history": {"step": 1, "messages": 2}},
        ),
        visibility=VisibilityConfig(level=FULL, summary="Calling llm"),
    )
    return step.model_dump_json(), StepFacts(StepType.TOOL_CALL, ToolType.LLM, "llm", FULL)


NATIVE: list[dict[str, Any]] = [
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_9",
                "type": "function",
                "function": {"name": "payroll", "arguments": json.dumps(ARGUMENTS)},
            },
            {
                "id": "call_10",
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression": "2 + 2"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_9", "content": OBSERVATION},
    {"role": "tool", "tool_call_id": "call_10", "content": '{"result": 4}'},
]


def messages_seen(view: ReaderView, steps: list[Stored], prompt: Stored) -> list[dict[str, Any]]:
    for stored in steps:
        view.render(*stored)
    rendered = view.render(*prompt)
    assert rendered is not None
    messages: list[dict[str, Any]] = json.loads(rendered)["tool_call"]["arguments"]["messages"]
    return messages


def test_a_hidden_call_and_its_result_are_hidden_in_a_later_prompt_and_nothing_else_is() -> None:
    view = reader({"tools": {"payroll": "hidden"}})

    messages = messages_seen(view, tool_steps(), llm_call(NATIVE))

    assert MARKER not in json.dumps(messages)
    payroll, calculator = messages[0]["tool_calls"]
    assert payroll["function"] == {"name": "payroll", "arguments": HIDDEN}
    assert calculator == NATIVE[0]["tool_calls"][1]
    assert messages[1:] == [
        {"role": "tool", "tool_call_id": "call_9", "content": HIDDEN},
        NATIVE[2],
    ]


def test_a_summary_reader_sees_the_steps_summaries_in_their_place() -> None:
    view = reader({"tools": {"payroll": "summary"}})

    messages = messages_seen(view, tool_steps(), llm_call(NATIVE))

    assert messages[0]["tool_calls"][0]["function"]["arguments"] == "Calling payroll"
    assert messages[1]["content"] == "looked up the payroll"
    assert MARKER not in json.dumps(messages)


GRANTED = {"payroll": "full"}


def test_a_reader_who_sees_the_tool_whole_gets_the_prompt_as_recorded() -> None:
    prompt = llm_call(NATIVE)
    for view in (
        reader({"tools": {"payroll": "hidden"}, "roles": {"member": {"tools": GRANTED}}}),
        reader({"tools": {"payroll": "hidden"}}, full_access=True),
    ):
        for stored in tool_steps():
            view.render(*stored)
        assert view.render(*prompt) is prompt[0]
        assert not view.withholds


def test_a_text_format_observation_a_short_result_and_an_embedded_one_are_replaced() -> None:
    view = reader({"tools": {"payroll": "hidden", "lookup": "hidden"}})
    steps = [*tool_steps(), *tool_steps(tool="lookup", result="42")]
    prompt = llm_call(
        [
            {"role": "assistant", "content": "Action: payroll\nAction Input: {}"},
            {"role": "user", "content": f"Observation: {OBSERVATION}"},
            {"role": "user", "content": "Observation: 42"},
            {"role": "user", "content": [{"type": "text", "text": f"Tool result: {OBSERVATION}"}]},
            {"role": "user", "content": f"Summarise: Tool result: {OBSERVATION}\n\nUser: 42 ok?"},
        ]
    )

    messages = messages_seen(view, steps, prompt)

    assert [m["content"] for m in messages] == [
        "Action: payroll\nAction Input: {}",
        f"Observation: {HIDDEN}",
        f"Observation: {HIDDEN}",
        [{"type": "text", "text": f"Tool result: {HIDDEN}"}],
        # A short result is replaced where it is the text told, not in every word.
        f"Summarise: Tool result: {HIDDEN}\n\nUser: 42 ok?",
    ]


def test_a_step_learned_before_a_page_is_withheld_on_the_page() -> None:
    view = reader({"tools": {"payroll": "hidden"}})
    for stored in tool_steps():
        view.learn(*stored)

    assert view.withholds
    rendered = view.render(*llm_call(NATIVE))
    assert rendered is not None
    assert MARKER not in rendered


def test_without_a_withheld_step_an_llm_call_is_passed_as_stored() -> None:
    view = reader({"tools": {"calculator": "hidden"}})
    for stored in tool_steps():
        view.render(*stored)
    prompt = llm_call(NATIVE)

    assert not view.withholds
    assert view.render(*prompt) is prompt[0]


def test_arguments_holding_nothing_withheld_are_returned_as_they_are() -> None:
    withheld = WithheldContent()
    withheld.withhold({"tool_result": {"success": False, "error_code": "x", "error": "boom"}}, "s")
    arguments = {"messages": NATIVE}

    assert withheld.arguments(arguments) is arguments
    failed = {"messages": [{"role": "tool", "tool_call_id": "c", "content": "Error (x): boom"}]}
    assert withheld.arguments(failed)["messages"][0]["content"] == "s"
