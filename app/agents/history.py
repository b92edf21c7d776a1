"""A conversation's history, rebuilt from the chains of its earlier turns.

Each turn contributes, in order: the user's messages (as the task gave them), then every
exchange of its run as the model saw it — each LLM reply that called tools (as an assistant
message with `tool_calls`) followed by one `tool` message per call with its observation — and
finally the turn's answer (its synthesis) as an assistant message. A call whose result was
never stored (the turn ended first) gets an observation saying so, so the history is always a
valid chat. Compaction calls (`purpose: compaction`) are not part of the conversation.

Works on step documents as stored (decoded JSON), without building step models: rebuilding a
long conversation must stay cheap for every turn.
"""

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.agents.compaction import COMPACTION
from app.chain import ToolType
from app.chain.observations import observation_text

NO_RESULT = "Error (interrupted): the turn ended before this call returned a result"


def turn_messages(
    request: Mapping[str, Any], steps: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """One turn as chat messages: its `request` (the stored task submission: `input` or
    `messages`) and its stored steps (tool calls, tool results and syntheses; others are
    skipped), in step order."""
    messages = user_messages(request)
    llm_calls: set[str] = set()
    compactions: set[str] = set()
    # The reply whose tool calls are being answered: its assistant message, and for each of
    # its calls (by position) the correlation id of the call step that ran it.
    pending: list[list[str | None]] = []  # [tool_call id, correlation id]
    replying: str | None = None  # the result step id of the reply `pending` belongs to
    results: dict[str, str] = {}
    # LLM replies (by result step id) that called no tool natively: a text-format model, whose
    # tool calls the agent parsed from its text.
    text_replies: set[str] = set()
    for step in steps:
        kind = step.get("type")
        if kind == "tool_call":
            call = step["tool_call"]
            correlation = call["correlation_id"]
            if call.get("tool_type") == ToolType.LLM:
                llm_calls.add(correlation)
                if call.get("arguments", {}).get("purpose") == COMPACTION:
                    compactions.add(correlation)
                continue
            parent = step.get("parent_step_id")
            if parent in text_replies:
                _close(messages, pending, results)
                call_id = f"call_{step.get('step_number')}"
                native = {"id": call_id, "name": call["tool_name"], "arguments": call["arguments"]}
                messages.append(_assistant_calls(None, [native]))
                pending.append([call_id, correlation])
                replying = None
            elif parent is not None and parent == replying:
                # The reply's calls run in the order the model gave them.
                unassigned = next((entry for entry in pending if entry[1] is None), None)
                if unassigned is not None:
                    unassigned[1] = correlation
        elif kind == "tool_result":
            result = step["tool_result"]
            correlation = result["correlation_id"]
            if correlation in llm_calls:
                if correlation in compactions or not result.get("success"):
                    continue
                _close(messages, pending, results)
                value = result.get("result") or {}
                calls = value.get("tool_calls") or [] if isinstance(value, dict) else []
                if not calls:
                    # A final answer (its synthesis follows), or a text-format tool call.
                    text_replies.add(step["id"])
                    continue
                messages.append(_assistant_calls(value.get("content"), calls))
                pending.extend([call["id"], None] for call in calls)
                replying = step["id"]
            else:
                results[correlation] = observation_text(result)
        elif kind == "synthesis":
            _close(messages, pending, results)
            messages.append({"role": "assistant", "content": step["synthesis"]["conclusion"]})
    _close(messages, pending, results)
    return messages


def user_messages(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A task submission's own messages."""
    if request.get("messages"):
        return [dict(message) for message in request["messages"]]
    return [{"role": "user", "content": request.get("input") or ""}]


def as_text_history(history: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A native history for a model that uses the text ReAct format: tool calls become
    `Action:` replies, their results `Observation:` messages, answers `Final Answer:`."""
    rendered: list[dict[str, Any]] = []
    for message in history:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            for call in message["tool_calls"]:
                function = call.get("function", {})
                rendered.append(
                    {
                        "role": "assistant",
                        "content": f"Action: {function.get('name')}\n"
                        f"Action Input: {function.get('arguments') or '{}'}",
                    }
                )
        elif role == "tool":
            rendered.append({"role": "user", "content": f"Observation: {message.get('content')}"})
        elif role == "assistant":
            rendered.append({"role": "assistant", "content": f"Final Answer: {message['content']}"})
        else:
            rendered.append(dict(message))
    return rendered


def _assistant_calls(content: str | None, calls: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": _arguments(call["arguments"])},
            }
            for call in calls
        ],
    }


def _arguments(arguments: Any) -> str:
    # As the ReAct agent sends them, so that a rebuilt history is what the model saw.
    return arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)


def _close(
    messages: list[dict[str, Any]], pending: list[list[str | None]], results: dict[str, str]
) -> None:
    """Answers every call of the reply being answered, in its order."""
    for call_id, correlation in pending:
        content = results.pop(correlation, NO_RESULT) if correlation else NO_RESULT
        messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
    pending.clear()
