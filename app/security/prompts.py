"""What a reader may see of the prompts that LLM call steps record.

An LLM call step records the messages it sent, and those repeat what earlier steps hold: the
arguments of the tool calls the model made (in assistant messages) and what each call returned
(in tool messages, or in the text a model without native tool calling is told). A reader who
sees a tool's step only as a summary, or not at all, must not read its content there either.

`WithheldContent` remembers, for one reader, the tool steps withheld from it, as the model was
told them (`app.chain.observations` for results, the sorted JSON of arguments for calls), and
puts in their place, wherever a later LLM call's messages repeat them, what the reader sees of
those steps: their summary, or `HIDDEN`.
"""

import json
import re
from collections.abc import Mapping
from typing import Any

from app.chain.observations import observation_text

HIDDEN = "[hidden]"
# A withheld text this long is replaced wherever a message holds it (a compaction prompt
# quotes tool results within its own text); a shorter one only where it is the whole text or
# follows a label (`Observation: 42`), lest a short value mask ordinary words everywhere.
MIN_EMBEDDED_CHARS = 8
# What JSON may write otherwise than as it is (non-ASCII characters aside, which only a `\u`
# escape hides).
_ESCAPABLE = re.compile(r'["\\/\x00-\x1f]')


class WithheldContent:
    """The content of the tool steps withheld from one reader, and what it sees instead."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}  # withheld text → what the reader sees instead
        self._embedded: list[str] = []  # the long ones, longest first
        self._calls: dict[tuple[str, str], str] = {}  # (tool name, arguments JSON) → shown
        # Of each withheld text, a part every JSON encoding of it holds verbatim.
        self._needles: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self._texts)

    def withhold(self, step: Mapping[str, Any], shown: str) -> None:
        """Remembers a tool_call or tool_result step (decoded) withheld from the reader, which
        sees `shown` in its place."""
        call = step.get("tool_call")
        if isinstance(call, dict):
            arguments = _arguments_text(call.get("arguments"))
            self._calls[(str(call.get("tool_name")), arguments)] = shown
            self._add(arguments, shown)
        result = step.get("tool_result")
        if isinstance(result, dict):
            self._add(observation_text(result), shown)

    def may_hold(self, step_json: str) -> bool:
        """Whether a stored step's JSON text may repeat withheld content: False only when
        it cannot (a cheap test, so that the LLM calls that repeat nothing withheld are
        passed on without being decoded)."""
        if not self._texts:
            return False
        return "\\u" in step_json or any(needle in step_json for needle in self._needles)

    def arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """An LLM call's recorded arguments with the withheld content of its `messages`
        replaced; `arguments` itself when they hold none."""
        messages = arguments.get("messages")
        if not self._texts or not isinstance(messages, list):
            return arguments
        shown = [self._message(message) for message in messages]
        if all(a is b for a, b in zip(shown, messages, strict=True)):
            return arguments
        return {**arguments, "messages": shown}

    def _add(self, text: str, shown: str) -> None:
        if not text or text in self._texts:
            return
        self._texts[text] = shown
        self._needles.add(max(_ESCAPABLE.split(text), key=len))
        if len(text) >= MIN_EMBEDDED_CHARS:
            self._embedded.append(text)
            self._embedded.sort(key=len, reverse=True)

    def _message(self, message: Any) -> Any:
        if not isinstance(message, dict):
            return message
        changed: dict[str, Any] = {}
        content = message.get("content")
        if isinstance(content, str):
            text = self._text(content)
            if text is not content:
                changed["content"] = text
        elif isinstance(content, list):
            parts = [self._part(part) for part in content]
            if any(a is not b for a, b in zip(parts, content, strict=True)):
                changed["content"] = parts
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            shown = [self._call(call) for call in calls]
            if any(a is not b for a, b in zip(shown, calls, strict=True)):
                changed["tool_calls"] = shown
        return {**message, **changed} if changed else message

    def _part(self, part: Any) -> Any:
        if isinstance(part, dict) and isinstance(text := part.get("text"), str):
            shown = self._text(text)
            return part if shown is text else {**part, "text": shown}
        return part

    def _call(self, call: Any) -> Any:
        """An assistant message's tool call, its arguments shown as its withheld step is."""
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            return call
        key = (str(function.get("name")), _arguments_text(function.get("arguments")))
        shown = self._calls.get(key)
        if shown is None:
            return call
        return {**call, "function": {**function, "arguments": shown}}

    def _text(self, text: str) -> str:
        """`text` with every withheld text it holds replaced; `text` itself when none."""
        whole = self._texts.get(text)
        if whole is not None:
            return whole
        label, colon, rest = text.partition(": ")
        if colon and (shown := self._texts.get(rest)) is not None:
            return f"{label}{colon}{shown}"
        replaced = text
        for withheld in self._embedded:
            if withheld in replaced:
                replaced = replaced.replace(withheld, self._texts[withheld])
        return replaced if replaced != text else text


def _arguments_text(arguments: Any) -> str:
    """A call's arguments as the agents write them into an assistant message: JSON with sorted
    keys (text the model wrote that is not JSON, as it is)."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
        return json.dumps(parsed, sort_keys=True)
    return json.dumps(arguments, sort_keys=True)
