"""The offline demo model's behaviour: a small, deterministic, tool-using "model".

It answers arithmetic by calling `calculator`, "what time is it in <place>" by calling
`current_time`, and anything else by saying what it is and how to configure a real model. It
speaks both native tool calling (when given `tools`) and the text ReAct format (when its system
prompt asks for `Action:` / `Action Input:`). Arithmetic it cannot read, or a tool call that
failed, makes it say plainly that it could not work the answer out, and why; a tool's error is
never passed off as the answer. Asked for a JSON Schema's shape, it gives its final answer as
JSON built from the schema (`demo_structured`). The note of a task's attached files is context,
never the question.
"""

import json
import re
from dataclasses import dataclass, field
from typing import Any

from app.llm.demo_arithmetic import read_arithmetic
from app.llm.demo_strategies import plan_reply, strategy_reply, synthesis_reply
from app.llm.demo_structured import requested_schema, shaped_answer

CALCULATOR = "calculator"
CURRENT_TIME = "current_time"

PLAIN_ANSWER = (
    "I am OmniForge's offline demo model. I can only do arithmetic (with the calculator tool) "
    "and tell the time anywhere (with the current_time tool). To use a real model, put a LiteLLM "
    "model_list YAML in OMNIFORGE_MODELS_FILE and name one of its models in "
    "OMNIFORGE_DEFAULT_MODEL (or pass --model); see docs/models.md."
)

UNREADABLE = (
    "I cannot read {task} as arithmetic (I read numbers in digits with + - * / ^ % and "
    "parentheses, plus, minus, times, divided by, to the power of, squared, cubed, "
    "square root of, percent of, pi and e)"
)
NO_CALCULATOR = "the calculator tool is not available to this task"
_ERROR = re.compile(r"^Error \((?P<code>\w+)\): (?P<message>.*)$", re.DOTALL)
_INVALID = re.compile(r"^invalid arguments for [^:]+: (?:\w+: )?")
# How the note `AgentTask.conversation` adds after a task with attached files begins (in
# `app.agents.models`, which the LLM layer does not import).
_FILES_NOTE = "Files attached to this task"
# Notes a strategy adds after the task (a search's steps tried, its request to conclude):
# context, not the question.
_CONTEXT_NOTES = (_FILES_NOTE, "Steps already tried from here", "From the task and the steps")
_REASON_CHARS = 160
_QUOTED_TASK_CHARS = 80
_TIME_QUESTION = re.compile(
    r"\b(?:what time|what's the time|current time|time is it|the time now|local time)\b",
    re.IGNORECASE,
)
_PLACE = re.compile(
    r"\bin\s+(?:the\s+)?([A-Za-zÀ-ÿ][\w .'’/-]*?)\s*(?:\?|!|\.(?:\s|$)|,|;|\band\b|\bright now\b"
    r"|\bnow\b|\btoday\b|$)",
    re.IGNORECASE,
)


_Schema = dict[str, Any] | bool | None


@dataclass(frozen=True, slots=True)
class Intent:
    tool: str
    arguments: dict[str, Any]
    plan: str


@dataclass(slots=True)
class DemoReply:
    content: str | None
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def respond(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    response_format: object = None,
) -> DemoReply:
    """The demo model's reply to a conversation; its final answer JSON matching the schema
    the request asks for, in its `response_format` or its system prompt."""
    schema = requested_schema(messages, response_format)
    if tools:
        names = {tool["function"]["name"] for tool in tools if tool.get("type") == "function"}
        return _respond_native(messages, names, schema)
    system = " ".join(_text(m) for m in messages if m.get("role") == "system")
    if "Action Input:" in system:
        names = {name for name in (CALCULATOR, CURRENT_TIME) if f"{name}:" in system}
        return _respond_react(messages, names, schema)
    if any(message.get("role") == "tool" for message in messages):
        # Asked to conclude, without tools, a conversation that used them: from their results.
        return _respond_native(messages, {CALCULATOR, CURRENT_TIME}, schema)
    first = _task_index(messages, last=False)
    if first >= 0:
        task = _text(messages[first])
        planned = [
            (intent.tool, intent.arguments, intent.plan)
            for intent in intents(task, {CALCULATOR, CURRENT_TIME})
        ]
        later = "\n".join(_text(m) for m in messages[first + 1 :] if m.get("role") == "user")
        plan = plan_reply(system, planned)
        if plan is not None:
            return DemoReply(plan)
        answer = synthesis_reply(system, later)
        if answer is not None:
            return DemoReply(_final(answer, None, schema))
        reply = strategy_reply(system, task, later, lambda text: _final(text, None, schema))
        if reply is not None:
            return DemoReply(reply)
    return DemoReply(_final(PLAIN_ANSWER, None, schema))


def intents(task: str, available: set[str]) -> list[Intent]:
    """The tool calls a task needs, in the order they appear."""
    found: list[tuple[int, Intent]] = []
    if CALCULATOR in available:
        for arithmetic in read_arithmetic(task):
            if (expression := arithmetic.expression) is not None:
                plan = f"use the calculator to evaluate {expression}"
                intent = Intent(CALCULATOR, {"expression": expression}, plan)
                found.append((arithmetic.position, intent))
    if CURRENT_TIME in available and (question := _TIME_QUESTION.search(task)):
        place_match = _PLACE.search(task, question.start())
        place = place_match.group(1).strip(" .'’") if place_match else "UTC"
        found.append(
            (
                question.start(),
                Intent(CURRENT_TIME, {"timezone": place}, f"look up the current time in {place}"),
            )
        )
    return [intent for _, intent in sorted(found, key=lambda item: item[0])]


def unanswerable(task: str, available: set[str]) -> str | None:
    """Why some arithmetic the task asks for cannot be worked out; None when all of it can."""
    found = read_arithmetic(task)
    if found and CALCULATOR not in available:
        return NO_CALCULATOR
    if any(arithmetic.expression is None for arithmetic in found):
        quoted = " ".join(task.split())
        if len(quoted) > _QUOTED_TASK_CHARS:
            quoted = quoted[: _QUOTED_TASK_CHARS - 1] + "…"
        return UNREADABLE.format(task=f"“{quoted}”")
    return None


def _respond_native(
    messages: list[dict[str, Any]], available: set[str], schema: _Schema
) -> DemoReply:
    task_index = _task_index(messages, last=True)
    task = _text(messages[task_index]) if task_index >= 0 else ""
    later = messages[task_index + 1 :]
    results = [m for m in later if m.get("role") == "tool"]
    if results:
        calls = {call["id"]: call["function"] for m in later for call in m.get("tool_calls") or []}
        answers = []
        for result in results:
            call = calls.get(result.get("tool_call_id", ""), {})
            arguments = _arguments(call.get("arguments"))
            answers.append(_describe(call.get("name", "tool"), arguments, _text(result)))
        text = _answer(answers, unanswerable(task, available))
        return DemoReply(_final(text, _first_result([_text(r) for r in results]), schema))
    planned = intents(task, available)
    if not planned:
        reason = unanswerable(task, available)
        text = PLAIN_ANSWER if reason is None else _could_not(reason)
        return DemoReply(_final(text, None, schema))
    plan = "; then I will ".join(intent.plan for intent in planned)
    return DemoReply(f"I will {plan}.", [(i.tool, i.arguments) for i in planned])


def _respond_react(
    messages: list[dict[str, Any]], available: set[str], schema: _Schema
) -> DemoReply:
    task_index = _task_index(messages, last=False)
    task = _text(messages[task_index]) if task_index >= 0 else ""
    planned = intents(task, available)
    reason = unanswerable(task, available)
    observations = [
        _text(m).removeprefix("Observation:").strip()
        for m in messages[task_index + 1 :]
        if m.get("role") == "user" and _text(m).startswith("Observation:")
    ]
    if not planned:
        if reason is not None:
            answer = _final(_could_not(reason), None, schema)
            return DemoReply(f"Thought: I cannot work this out.\nFinal Answer: {answer}")
        answer = _final(PLAIN_ANSWER, None, schema)
        return DemoReply(f"Thought: No tool can help with this.\nFinal Answer: {answer}")
    if len(observations) < len(planned):
        step = planned[len(observations)]
        return DemoReply(
            f"Thought: I need to {step.plan}.\nAction: {step.tool}\n"
            f"Action Input: {json.dumps(step.arguments)}"
        )
    answers = [
        _describe(step.tool, step.arguments, observation)
        for step, observation in zip(planned, observations, strict=False)
    ]
    answer = _final(_answer(answers, reason), _first_result(observations), schema)
    return DemoReply(f"Thought: I now know the final answer.\nFinal Answer: {answer}")


def _final(text: str, number: int | float | None, schema: _Schema) -> str:
    """The final answer: `text`, or with a schema asked for, JSON of its shape holding `text`
    and `number` (the arithmetic result, if any)."""
    return text if schema is None else shaped_answer(schema, text, number)


def _first_result(observations: list[str]) -> int | float | None:
    """The first calculator result among the tool results: the answer as a number."""
    for observation in observations:
        try:
            result = json.loads(observation)
        except json.JSONDecodeError:
            continue
        if isinstance(result, dict) and "expression" in result:
            value = _number(result.get("result"))
            if isinstance(value, int | float) and not isinstance(value, bool):
                return value
    return None


def _answer(answers: list[str], reason: str | None) -> str:
    return " ".join([*answers, _could_not(reason)] if reason is not None else answers)


def _could_not(reason: str) -> str:
    return f"I could not work this out: {reason}."


def _describe(tool: str, arguments: dict[str, Any], observation: str) -> str:
    """A sentence of the final answer for one tool result."""
    try:
        result = json.loads(observation)
    except json.JSONDecodeError:
        return _failure(tool, arguments, observation)
    if isinstance(result, dict) and "expression" in result and "result" in result:
        return f"{result['expression']} = {_number(result['result'])}."
    if isinstance(result, dict) and "timezone" in result and "local_time" in result:
        date, _, clock = str(result["local_time"]).partition(" ")
        weekday = result.get("weekday", "")
        offset = result.get("utc_offset", "")
        return f"In {result['timezone']} it is {clock} on {weekday} {date} (UTC{offset})."
    return f"The {tool} tool returned {observation}."


def _failure(tool: str, arguments: dict[str, Any], observation: str) -> str:
    """What could not be done and, briefly, why; never the tool's error as if it answered."""
    if tool == CALCULATOR:
        goal = f"work out {arguments.get('expression', 'the calculation')}"
    elif tool == CURRENT_TIME:
        goal = f"look up the time in {arguments.get('timezone', 'that place')}"
    else:
        goal = f"get an answer from the {tool} tool"
    error = _ERROR.match(observation.strip())
    code, message = (error["code"], error["message"]) if error else ("", observation.strip())
    if code == "invalid_arguments":
        detail = _INVALID.sub("", message).split(";")[0]
        reason = f"the {tool} tool did not accept it ({detail})"
    elif code == "timeout":
        reason = f"the {tool} tool took too long"
    elif code in ("tool_error", ""):
        reason = f"the {tool} tool reported {message}"
    else:
        reason = f"the {tool} call was refused or failed ({code})"
    if len(reason) > _REASON_CHARS:
        reason = reason[: _REASON_CHARS - 1].rstrip(" ,;:") + "…"
    return f"I could not {goal}: {reason}."


def _number(value: object) -> object:
    """An integral float reads as an integer (cbrt(27) is 3, not 3.0)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _arguments(raw: object) -> dict[str, Any]:
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return {}
    return arguments if isinstance(arguments, dict) else {}


def _task_index(messages: list[dict[str, Any]], *, last: bool) -> int:
    """Where the task is: the last (or first) user message, the note of attached files (context
    that follows it) not counted; -1 when there is none."""
    indexes = range(len(messages) - 1, -1, -1) if last else range(len(messages))
    for index in indexes:
        message = messages[index]
        if message.get("role") == "user" and not _text(message).startswith(_CONTEXT_NOTES):
            return index
    return -1


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""
