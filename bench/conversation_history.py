"""What a conversation's next turn costs to start: rebuilding its history from the stored
chains of its earlier turns — whole (a process that has not served the conversation yet: two
queries and the rebuild), and per turn (the process that served the previous turn keeps the
history and reads only that turn).

The turns are what a ReAct run of a tool-using question leaves behind, written through the
service's own write path (ReasoningChain -> RunRecorder -> RunWrites): per turn the user's
question, an LLM call that calls the calculator, the calculator's call and result, an LLM
call that answers, a thought and the synthesis (7 steps)."""

import statistics
import time
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from app.agents.prompts import NATIVE_SYSTEM_PROMPT
from app.chain import (
    ReasoningChain,
    ReasoningStep,
    StepType,
    SynthesisInfo,
    ThinkingInfo,
    ToolCallInfo,
    ToolResultInfo,
    ToolType,
)
from app.chain.models import utc_now
from app.resources.conversations.store import ConversationRepository
from app.runs.conversations import History, rebuild
from app.storage import Database
from app.storage.runs import RunStores
from bench.recorded_run import RecordedRun, bench_runner
from bench.service_harness import TENANT, postgres_database, run_async

TURNS = 50
_MODEL = "gpt-4o-mini"


@dataclass(frozen=True)
class HistoryCost:
    turns: int
    messages: int
    history_chars: int
    rebuild_ms: list[float]
    per_turn_ms: list[float]


def _llm(
    chain: ReasoningChain,
    messages: list[dict[str, Any]],
    value: dict[str, Any],
    parent: UUID | None,
) -> ReasoningStep:
    call = ToolCallInfo(
        tool_type=ToolType.LLM,
        tool_name="llm",
        arguments={"model": _MODEL, "messages": messages, "tools": ["calculator"]},
        model=_MODEL,
    )
    chain.add_step(ReasoningStep(type=StepType.TOOL_CALL, tool_call=call, parent_step_id=parent))
    return chain.add_step(
        ReasoningStep(
            type=StepType.TOOL_RESULT,
            tool_result=ToolResultInfo(
                correlation_id=call.correlation_id,
                success=True,
                result=value,
                duration_ms=640.0,
                model=_MODEL,
                input_tokens=1200,
                output_tokens=40,
                total_tokens=1240,
            ),
        )
    )


def _question(turn: int) -> str:
    return f"Order {turn}: {120 + turn} units at {3 + turn % 9}.25 each, plus shipping {turn % 7}."


def _turn_steps(chain: ReasoningChain, turn: int) -> None:
    question = _question(turn)
    expression = f"{120 + turn} * {3 + turn % 9}.25 + {turn % 7}"
    messages = [
        {"role": "system", "content": NATIVE_SYSTEM_PROMPT},
        {"role": "user", "content": question},
    ]
    reply = _llm(
        chain,
        messages,
        {
            "content": None,
            "tool_calls": [
                {"id": f"c{turn}", "name": "calculator", "arguments": {"expression": expression}}
            ],
            "finish_reason": "tool_calls",
        },
        None,
    )
    call = ToolCallInfo(
        tool_type=ToolType.SKILL, tool_name="calculator", arguments={"expression": expression}
    )
    step = chain.add_step(
        ReasoningStep(type=StepType.TOOL_CALL, tool_call=call, parent_step_id=reply.id)
    )
    total = (120 + turn) * (3 + turn % 9 + 0.25) + turn % 7
    chain.add_step(
        ReasoningStep(
            type=StepType.TOOL_RESULT,
            tool_result=ToolResultInfo(
                correlation_id=call.correlation_id,
                success=True,
                result={"expression": expression, "result": total},
                duration_ms=0.2,
            ),
            parent_step_id=step.id,
        )
    )
    answer = f"Order {turn} comes to {total:.2f} in all, shipping included."
    final = _llm(
        chain, messages, {"content": answer, "tool_calls": [], "finish_reason": "stop"}, None
    )
    chain.add_step(
        ReasoningStep(
            type=StepType.THINKING, thinking=ThinkingInfo(thought="Done."), parent_step_id=final.id
        )
    )
    chain.add_step(
        ReasoningStep(
            type=StepType.SYNTHESIS, synthesis=SynthesisInfo(conclusion=answer, sources=[final.id])
        )
    )


async def build_conversation(database_url: str, turns: int = TURNS) -> UUID:
    """Stores a conversation of `turns` finished turns; returns its id."""
    database = Database(database_url)
    stores = RunStores.of(database)
    async with database.transaction() as connection:
        conversation = await ConversationRepository(connection, TENANT).create(
            user_id="bench", agent_name="default", agent_version=None, metadata={}, at=utc_now()
        )
    async with bench_runner(stores) as runner_id:
        for turn in range(1, turns + 1):
            run = await RecordedRun.start(
                stores,
                TENANT,
                runner_id,
                request={"input": _question(turn)},
                model=_MODEL,
                agent_id="default@1",
                conversation_id=conversation.id,
                after_turns=turn - 1,
            )
            _turn_steps(run.chain, turn)
            await run.complete()
    await database.dispose()
    return conversation.id


async def measure(database_url: str, turns: int, samples: int) -> HistoryCost:
    conversation_id = await build_conversation(database_url, turns)
    database = Database(database_url)
    rebuilt: list[float] = []
    per_turn: list[float] = []
    known = History(turns - 1, [])
    try:
        async with database.read() as connection:
            for _ in range(3):  # warm-up: connection, statement caches
                history = await rebuild(connection, TENANT, conversation_id)
            for _ in range(samples):
                started = time.perf_counter()
                history = await rebuild(connection, TENANT, conversation_id)
                rebuilt.append((time.perf_counter() - started) * 1000)
            for _ in range(samples):
                started = time.perf_counter()
                newest = await rebuild(connection, TENANT, conversation_id, after=known)
                per_turn.append((time.perf_counter() - started) * 1000)
            assert newest.turns == turns
    finally:
        await database.dispose()
    assert history.turns == turns, history.turns
    chars = sum(len(str(m.get("content") or "")) for m in history.messages)
    return HistoryCost(turns, len(history.messages), chars, rebuilt, per_turn)


def run(turns: int = TURNS, samples: int = 200) -> HistoryCost:
    async def main() -> HistoryCost:
        async with postgres_database() as url:
            return await measure(url, turns, samples)

    return run_async(main())


def median(values: list[float]) -> float:
    return statistics.median(values)
