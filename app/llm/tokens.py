"""Prompt tokens as LiteLLM's `token_counter` counts them, each message counted once.

A ReAct conversation grows by a few messages per call, and every call is estimated before it
runs: counting the whole prompt again each time costs about a millisecond at 1,500 tokens (the
tokenizer), most of it for messages already counted. LiteLLM's count of a conversation is the
sum of its messages' counts (each alone counts 3 tokens for the reply's priming, once in all)
plus what the tools add, so both are cached. Each is counted as LiteLLM would, without it
(`app.llm.counting`), unless it holds what only LiteLLM counts (images, files).
"""

import hashlib
import json
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any

from app.bulkheads import TenantThreads
from app.llm import counting
from app.llm.counting import NotCounted
from app.llm.wire import tools_key

_LONG_KEY_CHARS = 4096
# A message this long takes the tokenizer milliseconds (about 16 ms for 200,000 characters):
# counted in a worker thread, so that other runs and requests go on meanwhile (at most a few
# of one tenant's at once: a tenant sending huge prompts waits for its own).
LARGE_MESSAGE_CHARS = 16_000


class PromptTokens:
    """Counts prompts with a bounded cache of per-message and per-tool-set counts."""

    def __init__(self, max_entries: int = 20_000, *, litellm_counts: bool = True) -> None:
        """`litellm_counts`: what only LiteLLM counts (`counting.NotCounted`) is counted by
        it; else `NotCounted` is raised, for the caller to load LiteLLM first."""
        self._max_entries = max_entries
        self._litellm_counts = litellm_counts
        self._messages: OrderedDict[tuple[str, Hashable], int] = OrderedDict()
        self._tools: OrderedDict[tuple[str, tuple[str, ...]], int] = OrderedDict()

    def count(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
    ) -> int:
        total = counting.REPLY_PRIMING
        for message in messages:
            total += self._message(model, message)
        if tools:
            total += self._tool_set(model, tools) + counting.tools_discount(messages)
        return total

    async def count_off_loop(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        threads: TenantThreads,
        tenant_id: str | None,
    ) -> int:
        """`count`, with each large message not counted before counted in one of the tenant's
        worker threads (the cache itself is only ever touched by the caller's thread)."""
        for message in messages:
            key = (model, _message_key(message))
            if key not in self._messages and _chars(message) >= LARGE_MESSAGE_CHARS:
                counted = await threads.run(
                    tenant_id, _count_message, model, message, self._litellm_counts
                )
                self._store(self._messages, key, counted)
        return self.count(model, messages, tools)

    def _message(self, model: str, message: dict[str, Any]) -> int:
        key = (model, _message_key(message))
        cached = self._messages.get(key)
        if cached is not None:
            self._messages.move_to_end(key)
            return cached
        counted = _count_message(model, message, self._litellm_counts)
        self._store(self._messages, key, counted)
        return counted

    def _tool_set(self, model: str, tools: list[dict[str, Any]]) -> int:
        """What the tools' definitions add (a system message's discount aside)."""
        key = (model, tools_key(tools))
        cached = self._tools.get(key)
        if cached is not None:
            self._tools.move_to_end(key)
            return cached
        try:
            counted = counting.count_tool_definitions(model, tools)
        except NotCounted:
            if not self._litellm_counts:
                raise
            from app.llm.litellm_env import litellm

            probe = [{"role": "user", "content": ""}]
            counted = int(litellm.token_counter(model=model, messages=probe, tools=tools))
            counted -= int(litellm.token_counter(model=model, messages=probe))
        self._store(self._tools, key, counted)
        return counted

    def _store(self, cache: "OrderedDict[Any, int]", key: Any, value: int) -> None:
        cache[key] = value
        if len(cache) > self._max_entries:
            cache.popitem(last=False)


def _count_message(model: str, message: dict[str, Any], litellm_counts: bool) -> int:
    try:
        return counting.count_message(model, message)
    except NotCounted:
        if not litellm_counts:
            raise
        from app.llm.litellm_env import litellm

        counted = int(litellm.token_counter(model=model, messages=[message]))
        return counted - counting.REPLY_PRIMING


def _chars(message: dict[str, Any]) -> int:
    """About how much text a message holds (its string values, and those of its content's
    parts: an image's data URL too, whose decoding counting it costs)."""
    total = 0
    for value in message.values():
        if isinstance(value, str):
            total += len(value)
        elif isinstance(value, list):
            total += sum(len(json.dumps(part, default=str)) for part in value)
    return total


def _message_key(message: dict[str, Any]) -> Hashable:
    """Plain messages key by their strings (whose hashes Python keeps); others by their JSON,
    or its digest when long (an image's data URL is not kept for every entry)."""
    items = tuple(sorted(message.items()))
    if all(isinstance(value, str | None) for _, value in items):
        return items
    document = json.dumps(message, sort_keys=True, separators=(",", ":"), default=str)
    if len(document) <= _LONG_KEY_CHARS:
        return document
    return hashlib.blake2b(document.encode(), digest_size=32).digest()
