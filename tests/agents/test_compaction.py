"""The compactor on its own: what it keeps, what it summarises, when it gives up. Tokens are
counted here as characters, so the figures are easy to follow."""

from typing import Any

import pytest

from app.agents.compaction import SUMMARY_HEADER, SUMMARY_PROMPT, Compactor
from app.chain import ErrorCode
from app.chain.errors import ChainAbort

Message = dict[str, Any]


async def _chars(messages: list[Message]) -> int:
    return sum(
        len(str(m.get("content") or "")) + len(str(m.get("tool_calls") or "")) for m in messages
    )


class Summaries:
    def __init__(self) -> None:
        self.prompts: list[list[Message]] = []

    async def __call__(self, prompt: list[Message], max_tokens: int) -> str:
        self.prompts.append(prompt)
        return f"summary {len(self.prompts)}"


def _conversation(turns: int, size: int = 100) -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": "be brief"}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"q{turn}".ljust(size, ".")})
        messages.append({"role": "assistant", "content": f"a{turn}".ljust(size, ".")})
    return messages


async def test_under_the_threshold_nothing_changes() -> None:
    summaries = Summaries()
    compactor = Compactor(0.8, _chars, summaries)
    messages = _conversation(3)
    assert await compactor.fit(messages, window=1000) == messages
    assert await compactor.fit(messages, window=None) == messages
    assert summaries.prompts == []


async def test_the_oldest_turns_are_summarised_and_the_newest_kept() -> None:
    summaries = Summaries()
    compactor = Compactor(0.5, _chars, summaries)
    messages = _conversation(10)  # 2,008 characters
    fitted = await compactor.fit(messages, window=3000)
    assert fitted[0] == messages[0]
    assert fitted[1] == {"role": "system", "content": SUMMARY_HEADER + "summary 1"}
    kept = fitted[2:]
    assert kept == messages[len(messages) - len(kept) :]
    assert await _chars(fitted) <= 0.5 * 3000
    [prompt] = summaries.prompts
    assert prompt[0]["content"] == SUMMARY_PROMPT
    assert "q0" in prompt[1]["content"]
    assert "a0" in prompt[1]["content"]


async def test_a_compaction_is_reused_until_the_rest_grows_past_the_threshold() -> None:
    summaries = Summaries()
    compactor = Compactor(0.5, _chars, summaries)
    messages = _conversation(10)
    first = await compactor.fit(messages, window=3000)
    messages.append({"role": "user", "content": "short"})
    second = await compactor.fit(messages, window=3000)
    assert second == [*first, {"role": "user", "content": "short"}]
    assert len(summaries.prompts) == 1
    messages.extend(_conversation(5)[1:])
    third = await compactor.fit(messages, window=3000)
    assert len(summaries.prompts) == 2
    # The earlier summary is folded into the new one.
    assert "summary 1" in summaries.prompts[1][1]["content"]
    assert third[1]["content"] == SUMMARY_HEADER + "summary 2"


async def test_a_tool_call_stays_with_its_results() -> None:
    summaries = Summaries()
    compactor = Compactor(0.8, _chars, summaries)
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
    }
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "x" * 300},
        call,
        {"role": "tool", "tool_call_id": "c", "content": "y" * 300},
        {"role": "user", "content": "z" * 100},
    ]
    fitted = await compactor.fit(messages, window=600)
    # The call and its result are summarised together or kept together, never split.
    roles = [m["role"] for m in fitted]
    assert ("tool" in roles) == any(m.get("tool_calls") for m in fitted)


async def test_a_newest_part_larger_than_the_window_fails_context_window() -> None:
    compactor = Compactor(0.8, _chars, Summaries())
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "x" * 2000}]
    with pytest.raises(ChainAbort) as raised:
        await compactor.fit(messages, window=1000)
    assert raised.value.error_code is ErrorCode.CONTEXT_WINDOW
    assert raised.value.details["window"] == 1000


async def test_an_old_part_larger_than_the_window_is_summarised_in_several_calls() -> None:
    summaries = Summaries()
    compactor = Compactor(0.8, _chars, summaries)
    messages = _conversation(30)  # 6,008 characters for a 1,000 window
    fitted = await compactor.fit(messages, window=1000)
    assert len(summaries.prompts) > 1
    sizes = [await _chars(prompt) for prompt in summaries.prompts]
    assert all(size + 125 <= 1000 for size in sizes), sizes
    assert await _chars(fitted) <= 1000
