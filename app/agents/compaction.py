"""Context compaction: a prompt that would pass a share (`compact_at`) of its model's input
window has its oldest part — earlier turns first, then the current run's oldest tool
exchanges — replaced by a summary that one LLM call writes. The summarising call is a step of
the chain like any other (`purpose: compaction`, its tokens and cost in the task's totals and
budget); the chain keeps every original message. A prompt that cannot be made to fit the
window fails the run with `context_window` before any call that would pass it.

A run's messages only ever grow at the end, so a compaction is remembered: the next call sends
the same summary in place of the same messages, and compacts again only when the rest grows
past the threshold (the earlier summary is then folded into the new one)."""

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.agents.images import content_text
from app.chain import ErrorCode
from app.chain.errors import ChainAbort

COMPACTION = "compaction"
SUMMARY_HEADER = "Summary of the earlier part of this conversation (compacted):\n"
SUMMARY_PROMPT = (
    "You compact conversations for an assistant that will continue them. Summarise the "
    "conversation below: keep every fact, number, name, decision, open question and tool "
    "result the assistant may still need, and what the user asked for. Write plain prose, "
    "as short as that allows. Reply with the summary only."
)
# Of the window, what the kept recent part may fill after a compaction: well below the
# threshold, so that the next calls do not compact again at once.
_KEEP_SHARE = 0.5

Message = dict[str, Any]
Counter = Callable[[list[Message]], Awaitable[int]]
Summariser = Callable[[list[Message], int], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Compaction:
    """The first `replaced` messages after the system prompt, summarised."""

    replaced: int
    summary: str


class Compactor:
    """Fits one run's prompts into its model's window. `count` gives a prompt's tokens as
    the model's tokenizer counts them (tools included); `summarise` makes the LLM call that
    summarises (a prompt and the output cap it may use) and returns its text."""

    def __init__(self, compact_at: float, count: Counter, summarise: Summariser) -> None:
        self._compact_at = compact_at
        self._count = count
        self._summarise = summarise
        self._done: Compaction | None = None

    async def fit(self, messages: list[Message], window: int | None) -> list[Message]:
        """`messages` as they may be sent: unchanged while they fit under the threshold,
        else with their oldest part summarised; `ChainAbort(context_window)` when even the
        newest part alone passes the window."""
        if window is None:
            return messages
        head, body = _split_head(messages)
        done = self._done if self._done is not None and self._done.replaced <= len(body) else None
        prompt = _with_summary(head, done, body)
        tokens = await self._count(prompt)
        if tokens <= self._compact_at * window:
            return prompt
        units = _units(body[done.replaced if done else 0 :])
        keep = await self._kept(head, units, window)
        if keep == len(units):  # nothing old enough to summarise
            if tokens <= window:
                return prompt
            raise _too_large(tokens, window)
        old = [message for unit in units[: len(units) - keep] for message in unit]
        summary = await self._summarise_all(done.summary if done else None, old, window)
        replaced = (done.replaced if done else 0) + len(old)
        self._done = Compaction(replaced, summary)
        prompt = _with_summary(head, self._done, body)
        tokens = await self._count(prompt)
        if tokens > window:
            raise _too_large(tokens, window)
        return prompt

    async def _kept(self, head: list[Message], units: list[list[Message]], window: int) -> int:
        """How many of the newest units stay as they are: as many as fit in the kept share
        of the window beside the system prompt, and at least the last one."""
        budget = _KEEP_SHARE * self._compact_at * window
        kept = 1
        while kept < len(units):
            tail = [message for unit in units[len(units) - kept - 1 :] for message in unit]
            if await self._count([*head, *tail]) > budget:
                break
            kept += 1
        return kept

    async def _summarise_all(
        self, summary: str | None, messages: list[Message], window: int
    ) -> str:
        """One summary of an earlier summary and `messages`, in as many calls as the window
        needs (each folds the next part into the summary so far)."""
        output_cap = max(64, min(2048, window // 8))
        lines = [_render(message) for message in messages]
        while lines:
            take = len(lines)
            while True:
                prompt = _summary_prompt(summary, lines[:take])
                if await self._count(prompt) + output_cap <= window:
                    break
                if take > 1:
                    take //= 2
                    continue
                # One message larger than the window: only as much of it as fits.
                lines[0] = lines[0][: max(len(lines[0]) // 2, 1)]
                if len(lines[0]) <= 1:
                    raise _too_large(await self._count(prompt), window)
            summary = await self._summarise(prompt, output_cap)
            lines = lines[take:]
        assert summary is not None
        return summary


def _split_head(messages: list[Message]) -> tuple[list[Message], list[Message]]:
    """The leading system messages (the agent's instructions) and the rest."""
    index = 0
    while index < len(messages) and messages[index].get("role") == "system":
        index += 1
    return messages[:index], messages[index:]


def _with_summary(
    head: list[Message], done: Compaction | None, body: list[Message]
) -> list[Message]:
    if done is None:
        return [*head, *body]
    summary = {"role": "system", "content": SUMMARY_HEADER + done.summary}
    return [*head, summary, *body[done.replaced :]]


def _units(messages: Sequence[Message]) -> list[list[Message]]:
    """Messages in the groups that must stay together: an assistant message that calls tools
    with the tool messages answering it; any other message alone."""
    units: list[list[Message]] = []
    for message in messages:
        if message.get("role") == "tool" and units and _calls_tools(units[-1][0]):
            units[-1].append(message)
        else:
            units.append([message])
    return units


def _calls_tools(message: Message) -> bool:
    return message.get("role") == "assistant" and bool(message.get("tool_calls"))


def _render(message: Message) -> str:
    role = message.get("role", "?")
    content = message.get("content")
    text = content_text(content)
    if role == "tool":
        return f"Tool result: {text}"
    if _calls_tools(message):
        calls = "; ".join(
            f"{call.get('function', {}).get('name')}({call.get('function', {}).get('arguments')})"
            for call in message["tool_calls"]
        )
        said = f"{text} " if content else ""
        return f"Assistant: {said}[called {calls}]"
    return f"{role.capitalize()}: {text}"


def _summary_prompt(summary: str | None, lines: list[str]) -> list[Message]:
    earlier = f"Summary so far:\n{summary}\n\n" if summary else ""
    conversation = "\n\n".join(lines)
    return [
        {"role": "system", "content": SUMMARY_PROMPT},
        {"role": "user", "content": f"{earlier}Conversation to summarise:\n{conversation}"},
    ]


def _too_large(tokens: int, window: int) -> ChainAbort:
    return ChainAbort(
        ErrorCode.CONTEXT_WINDOW,
        f"the prompt needs {tokens} tokens and the model takes {window}; even with the "
        "earlier conversation summarised it does not fit",
        details={"prompt_tokens": tokens, "window": window},
    )
