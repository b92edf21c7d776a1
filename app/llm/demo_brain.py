"""The offline demo model's behaviour: a small, deterministic, tool-using "model".

It answers arithmetic by calling `calculator`, "what time is it in <place>" by calling
`current_time`, and anything else by saying what it is and how to configure a real model. It
speaks both native tool calling (when given `tools`) and the text ReAct format (when its system
prompt asks for `Action:` / `Action Input:`).
"""

import json
import re
from dataclasses import dataclass, field
from typing import Any

CALCULATOR = "calculator"
CURRENT_TIME = "current_time"

PLAIN_ANSWER = (
    "I am OmniForge's offline demo model. I can only do arithmetic (with the calculator tool) "
    "and tell the time anywhere (with the current_time tool). To use a real model, put a LiteLLM "
    "model_list YAML in OMNIFORGE_MODELS_FILE and name one of its models in "
    "OMNIFORGE_DEFAULT_MODEL (or pass --model); see the README."
)

_WORD_OPERATORS = (
    (r"\bmultiplied by\b|\btimes\b", "*"),
    (r"\bdivided by\b", "/"),
    (r"\bplus\b", "+"),
    (r"\bminus\b", "-"),
    (r"\bto the power of\b", "**"),
    (r"\bsquared\b", "**2"),
    (r"\bcubed\b", "**3"),
)
_FUNCTIONS = (
    r"sqrt|cbrt|exp|log10|log2|log|sin|cos|tan|asin|acos|atan|abs|round|floor|ceil|factorial"
)
_EXPRESSION = re.compile(
    rf"(?:\b(?:{_FUNCTIONS})\b|\bpi\b|\d+(?:\.\d+)?|\*\*|[-+*/^×÷%(),]|[ \t])+", re.IGNORECASE
)
_OPERATOR = re.compile(rf"[-+*/^×÷%]|\b(?:{_FUNCTIONS})\b", re.IGNORECASE)
_TIME_QUESTION = re.compile(
    r"\b(?:what time|what's the time|current time|time is it|the time now|local time)\b",
    re.IGNORECASE,
)
_PLACE = re.compile(
    r"\bin\s+(?:the\s+)?([A-Za-zÀ-ÿ][\w .'’/-]*?)\s*(?:\?|!|\.(?:\s|$)|,|;|\band\b|\bright now\b"
    r"|\bnow\b|\btoday\b|$)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Intent:
    tool: str
    arguments: dict[str, Any]
    plan: str


@dataclass(slots=True)
class DemoReply:
    content: str | None
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def respond(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> DemoReply:
    """The demo model's reply to a conversation."""
    if tools:
        names = {tool["function"]["name"] for tool in tools if tool.get("type") == "function"}
        return _respond_native(messages, names)
    system = " ".join(_text(m) for m in messages if m.get("role") == "system")
    if "Action Input:" in system:
        names = {name for name in (CALCULATOR, CURRENT_TIME) if f"{name}:" in system}
        return _respond_react(messages, names)
    return DemoReply(PLAIN_ANSWER)


def intents(task: str, available: set[str]) -> list[Intent]:
    """The tool calls a task needs, in the order they appear."""
    found: list[tuple[int, Intent]] = []
    if CALCULATOR in available:
        for position, expression in _expressions(task):
            found.append(
                (
                    position,
                    Intent(
                        CALCULATOR,
                        {"expression": expression},
                        f"use the calculator to evaluate {expression}",
                    ),
                )
            )
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


def _respond_native(messages: list[dict[str, Any]], available: set[str]) -> DemoReply:
    task_index = _last_user_index(messages)
    results = [m for m in messages[task_index + 1 :] if m.get("role") == "tool"]
    if results:
        calls = {
            call["id"]: call["function"]["name"]
            for m in messages[task_index + 1 :]
            for call in m.get("tool_calls") or []
        }
        answers = [
            _describe(calls.get(m.get("tool_call_id", ""), "tool"), _text(m)) for m in results
        ]
        return DemoReply(" ".join(answers))
    planned = intents(_text(messages[task_index]) if task_index >= 0 else "", available)
    if not planned:
        return DemoReply(PLAIN_ANSWER)
    plan = "; then I will ".join(intent.plan for intent in planned)
    return DemoReply(f"I will {plan}.", [(i.tool, i.arguments) for i in planned])


def _respond_react(messages: list[dict[str, Any]], available: set[str]) -> DemoReply:
    task_index = next((i for i, m in enumerate(messages) if m.get("role") == "user"), -1)
    task = _text(messages[task_index]) if task_index >= 0 else ""
    planned = intents(task, available)
    observations = [
        _text(m).removeprefix("Observation:").strip()
        for m in messages[task_index + 1 :]
        if m.get("role") == "user" and _text(m).startswith("Observation:")
    ]
    if not planned:
        return DemoReply(f"Thought: No tool can help with this.\nFinal Answer: {PLAIN_ANSWER}")
    if len(observations) < len(planned):
        step = planned[len(observations)]
        return DemoReply(
            f"Thought: I need to {step.plan}.\nAction: {step.tool}\n"
            f"Action Input: {json.dumps(step.arguments)}"
        )
    answer = " ".join(
        _describe(step.tool, observation)
        for step, observation in zip(planned, observations, strict=False)
    )
    return DemoReply(f"Thought: I now know the final answer.\nFinal Answer: {answer}")


def _expressions(text: str) -> list[tuple[int, str]]:
    normalized = text
    for pattern, symbol in _WORD_OPERATORS:
        normalized = re.sub(pattern, symbol, normalized, flags=re.IGNORECASE)
    found = []
    for match in _EXPRESSION.finditer(normalized):
        expression = match.group(0).strip(" \t,")
        if (
            any(ch.isdigit() for ch in expression)
            and _OPERATOR.search(expression)
            and expression[0] not in "+*/^×÷%),"
            and expression.count("(") == expression.count(")")
        ):
            found.append((match.start(), expression))
    return found


def _describe(tool: str, observation: str) -> str:
    try:
        result = json.loads(observation)
    except json.JSONDecodeError:
        return f"The {tool} tool failed: {observation}"
    if isinstance(result, dict) and "expression" in result and "result" in result:
        return f"{result['expression']} = {result['result']}."
    if isinstance(result, dict) and "timezone" in result and "local_time" in result:
        date, _, clock = str(result["local_time"]).partition(" ")
        weekday = result.get("weekday", "")
        offset = result.get("utc_offset", "")
        return f"In {result['timezone']} it is {clock} on {weekday} {date} (UTC{offset})."
    return f"The {tool} tool returned {observation}."


def _last_user_index(messages: list[dict[str, Any]]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return -1


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""
