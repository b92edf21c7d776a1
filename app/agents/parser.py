"""Parses text-mode ReAct replies (`Thought:` / `Action:` / `Action Input:` / `Final Answer:`).

Survives what models actually write: hyphenated or dotted tool names, nested JSON, JSON in
code fences, markdown bold labels, `tool(args)` call syntax, hallucinated `Observation:` lines,
and replies with no markers at all (taken as the final answer).
"""

import json
import re
from dataclasses import dataclass
from typing import Any

_LABEL = re.compile(
    r"^[ \t]*(?:[*_]{1,2})?(thought|action input|action|final answer|observation)(?:[*_]{1,2})?"
    r"[ \t]*:[ \t]*(?:[*_]{1,2}[ \t]*)?",
    re.IGNORECASE | re.MULTILINE,
)
_TOOL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_FENCE = re.compile(r"^```[\w-]*[ \t]*\n?|\n?```[ \t]*$")


@dataclass(frozen=True, slots=True)
class ReActStep:
    """One parsed reply. Exactly one of `action` and `final_answer` is set, unless `error`."""

    thought: str | None = None
    action: str | None = None
    action_input: dict[str, Any] | str | None = None
    final_answer: str | None = None
    error: str | None = None


def parse_react(text: str) -> ReActStep:
    sections = _sections(_strip_fence(text.strip()))
    if not sections:
        stripped = text.strip()
        if not stripped:
            return ReActStep(error="the reply is empty")
        return ReActStep(final_answer=stripped)
    thought = _first(sections, "thought")
    action_at = _position(sections, "action")
    final_at = _position(sections, "final answer")
    if action_at is not None and (final_at is None or action_at < final_at):
        return _action(sections, thought)
    if final_at is not None:
        return ReActStep(thought=thought, final_answer=sections[final_at][1])
    return ReActStep(thought=thought, error="the reply has neither an Action nor a Final Answer")


def _sections(text: str) -> list[tuple[str, str]]:
    """(label, body) pairs in order; everything from a hallucinated Observation on is dropped."""
    matches = list(_LABEL.finditer(text))
    sections: list[tuple[str, str]] = []
    for index, match in enumerate(matches):
        label = match.group(1).lower()
        if label == "observation":
            break
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        sections.append((label, text[match.end() : end].strip()))
    return sections


def _action(sections: list[tuple[str, str]], thought: str | None) -> ReActStep:
    raw_name = _first(sections, "action") or ""
    raw_input = _first(sections, "action input")
    first_line = raw_name.splitlines()[0] if raw_name else ""
    name_text = first_line.strip().strip("`*'\" ")
    match = _TOOL_NAME.match(name_text)
    if match is None:
        return ReActStep(thought=thought, error=f"no tool name after 'Action:' ({first_line!r})")
    name = match.group(0).rstrip(".")
    rest = name_text[match.end() :].strip()
    if raw_input is None and rest.startswith("(") and rest.endswith(")"):
        raw_input = rest[1:-1]  # calculator({"expression": "1+1"})
    if raw_input is None:
        return ReActStep(thought=thought, action=name, action_input={})
    return ReActStep(thought=thought, action=name, action_input=_arguments(raw_input))


def _arguments(raw: str) -> dict[str, Any] | str:
    """A JSON object if there is one (the first, however nested); else the text itself."""
    text = _strip_fence(raw.strip())
    start = text.find("{")
    if start >= 0:
        try:
            value, _ = json.JSONDecoder().raw_decode(text, start)
        except json.JSONDecodeError:
            return text
        if isinstance(value, dict):
            return value
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _strip_fence(text: str) -> str:
    if text.startswith("```"):
        return _FENCE.sub("", text).strip()
    return text


def _first(sections: list[tuple[str, str]], label: str) -> str | None:
    index = _position(sections, label)
    return sections[index][1] if index is not None else None


def _position(sections: list[tuple[str, str]], label: str) -> int | None:
    for index, (name, _) in enumerate(sections):
        if name == label:
            return index
    return None
