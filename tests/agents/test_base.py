"""CoTAgent and ReasoningEngine as a user's own agent sees them, on the offline demo model."""

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from app.agents import AgentRuntime, AgentTask, CoTAgent, ReasoningEngine, RuntimeSettings
from app.agents.run import AgentRun
from app.chain import (
    ChainCompletedEvent,
    ChainFailedEvent,
    ChainStatus,
    DoneEvent,
    ErrorCode,
    ReasoningStepEvent,
    StepType,
    TaskState,
    ToolResultInfo,
    ToolType,
)
from app.chain.errors import ChainAbort
from app.config import Settings
from app.tools.base import BaseTool
from app.tools.builtin import CalculatorTool, CurrentTimeTool
from app.tools.executor import ToolExecutor
from app.tools.guards import PendingCall
from app.tools.models import ToolCallContext, ToolDefinition, ToolOutput
from app.tools.registry import ToolRegistry


@pytest.fixture(scope="module")
def runtime() -> AgentRuntime:
    tools = [CalculatorTool(), CurrentTimeTool()]
    return AgentRuntime.build(RuntimeSettings.model_validate(Settings()), tools=tools)


class ComputeThenAsk(CoTAgent):
    """Thinks, calls a tool, asks the model with a plain prompt, concludes."""

    agent_id = "compute-then-ask"

    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        engine.add_thinking("First the arithmetic, then a word from the model.", confidence=0.9)
        total = await engine.call_tool("calculator", {"expression": "6 * 7"})
        reply = await engine.call_llm(prompt="Say something.", system="Be brief.")
        engine.add_synthesis(
            f"{total.value['result']}; the model said: {reply.content}",
            [total.result_step.id, reply.step_id],
        )


async def test_a_custom_agent_reasons_through_the_engine(runtime: AgentRuntime) -> None:
    agent = ComputeThenAsk(runtime.executor, default_model="demo")
    events = [e async for e in agent.process_task(AgentTask(input="anything"))]

    run_chain_steps = [e.step for e in events if e.type == "reasoning_step"]
    assert [s.type for s in run_chain_steps] == [
        StepType.THINKING,
        StepType.TOOL_CALL,
        StepType.TOOL_RESULT,
        StepType.TOOL_CALL,
        StepType.TOOL_RESULT,
        StepType.SYNTHESIS,
    ]
    llm_call = run_chain_steps[3].tool_call
    assert llm_call is not None
    assert llm_call.arguments["prompt"] == "Say something."
    assert llm_call.arguments["system"] == "Be brief."
    assert llm_call.model == "demo"
    synthesis = run_chain_steps[-1].synthesis
    assert synthesis is not None
    assert synthesis.conclusion.startswith("42; the model said: I am OmniForge's offline demo")
    assert synthesis.sources == [run_chain_steps[2].id, run_chain_steps[4].id]
    assert isinstance(events[-2], ChainCompletedEvent)
    assert events[-2].answer == synthesis.conclusion
    assert {e.chain_id for e in events} == {events[0].chain_id}


class ConcludesTwice(CoTAgent):
    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        engine.add_synthesis("a first draft", [])
        engine.add_thinking("On reflection...")
        engine.add_synthesis("the answer", [])


class ConcludesWithoutAnswer(CoTAgent):
    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        engine.add_thinking("Nothing to say.")


@pytest.mark.parametrize(
    ("agent_class", "answer"), [(ConcludesTwice, "the answer"), (ConcludesWithoutAnswer, None)]
)
async def test_chain_completed_carries_the_last_conclusion_as_the_answer(
    runtime: AgentRuntime, agent_class: type[CoTAgent], answer: str | None
) -> None:
    agent = agent_class(runtime.executor, default_model="demo")
    events = [e async for e in agent.process_task(AgentTask(input="anything"))]

    completed = events[-2]
    assert isinstance(completed, ChainCompletedEvent)
    assert completed.answer == answer


class ListsTools(CoTAgent):
    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        engine.add_synthesis(",".join(d.name for d in engine.available_tools()), [])


@pytest.mark.parametrize(
    ("tools", "offered"),
    [(None, "calculator,current_time"), (["current_time"], "current_time"), ([], "")],
)
async def test_the_engine_offers_the_tasks_tools_but_never_the_llm(
    runtime: AgentRuntime, tools: list[str] | None, offered: str
) -> None:
    run = ListsTools(runtime.executor, default_model="demo").start(
        AgentTask(input="x", tools=tools)
    )
    chain = await run.wait()
    synthesis = chain.steps[-1].synthesis
    assert synthesis is not None
    assert synthesis.conclusion == offered


class Failing(CoTAgent):
    def __init__(self, runtime: AgentRuntime, error: Exception) -> None:
        super().__init__(runtime.executor, default_model="demo")
        self.error = error

    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        await engine.call_tool("calculator", {"expression": "1 + 1"})
        raise self.error


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (
            ChainAbort(ErrorCode.BUDGET_EXCEEDED, "max_cost_usd 0.01 reached"),
            "budget_exceeded",
            "max_cost_usd 0.01 reached",
        ),
        (KeyError("oops"), "internal_error", "KeyError: 'oops'"),
    ],
)
async def test_a_failure_ends_the_chain_with_a_code_and_keeps_its_steps(
    runtime: AgentRuntime, error: Exception, code: str, message: str
) -> None:
    run = Failing(runtime, error).start(AgentTask(input="x"))
    events = [e async for e in run.events()]

    failed, done = events[-2], events[-1]
    assert isinstance(failed, ChainFailedEvent)
    assert (failed.error_code, failed.error_message) == (code, message)
    assert isinstance(done, DoneEvent)
    assert done.final_state is TaskState.FAILED
    assert run.chain.status is ChainStatus.FAILED
    assert len(run.chain.steps) == 2  # the calculator call before the failure is kept
    assert run.chain.completed_at is not None


class Waiting(CoTAgent):
    def __init__(self, runtime: AgentRuntime) -> None:
        super().__init__(runtime.executor, default_model="demo")
        self.started = asyncio.Event()

    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        engine.add_thinking("waiting for something that never comes")
        self.started.set()
        await asyncio.Event().wait()


async def test_a_reader_that_goes_away_cancels_the_run(runtime: AgentRuntime) -> None:
    agent = Waiting(runtime)
    run = agent.start(AgentTask(input="x"))
    events = run.events()
    assert isinstance(events, AsyncGenerator)
    async for event in events:
        if event.type == "reasoning_step":
            break
    await events.aclose()

    assert run.done
    assert run.chain.status is ChainStatus.CANCELLED
    assert run.chain.error_code is ErrorCode.CANCELLED


async def test_cancel_ends_the_run_with_cancelled_events(runtime: AgentRuntime) -> None:
    agent = Waiting(runtime)
    run = agent.start(AgentTask(input="x"))
    await agent.started.wait()
    run.cancel("stopped by the operator")
    events = [e async for e in run.events()]

    failed, done = events[-2], events[-1]
    assert isinstance(failed, ChainFailedEvent)
    assert (failed.error_code, failed.error_message) == ("cancelled", "stopped by the operator")
    assert isinstance(done, DoneEvent)
    assert done.final_state is TaskState.CANCELLED
    assert await run.wait() is run.chain


class Sends(BaseTool):
    """A call with side effects (not idempotent): it starts only once its step is stored."""

    def __init__(self) -> None:
        self.calls = 0

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(name="send", type=ToolType.CUSTOM, description="Sends.")

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        self.calls += 1
        return ToolOutput("sent")


class SendsOnce(CoTAgent):
    agent_id = "sends-once"

    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        sent = await engine.call_tool("send", {})
        engine.add_synthesis("sent", [sent.result_step.id])


class SendsTwice(CoTAgent):
    agent_id = "sends-twice"

    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        await engine.call_tool("send", {})
        sent = await engine.call_tool("send", {})
        engine.add_synthesis("sent", [sent.result_step.id])


async def test_a_run_released_while_its_call_waits_to_be_stored_never_makes_the_call() -> None:
    tool = Sends()
    run = SendsOnce(ToolExecutor(ToolRegistry([tool])), default_model="x").start(
        AgentTask(input="x")
    )
    waiting, stored = asyncio.Event(), asyncio.Event()

    async def stored_through(count: int) -> None:
        waiting.set()
        await stored.wait()

    run.store_with(stored_through)
    reader = asyncio.ensure_future(_all_events(run))
    await waiting.wait()  # its call step is recorded; the call waits for it to be stored
    run.release()
    stored.set()
    events = await reader

    assert tool.calls == 0
    assert run.released
    steps = [event.step.type for event in events if isinstance(event, ReasoningStepEvent)]
    assert steps == [StepType.TOOL_CALL]  # its resumer finds the call unanswered, and makes it
    assert not any(isinstance(event, DoneEvent) for event in events)


class Holds:
    """A guard that keeps each call waiting (a budget's estimate, a rate limit) until let go,
    and records what it is told of the call after."""

    def __init__(self) -> None:
        self.waiting, self.go = asyncio.Event(), asyncio.Event()
        self.told: list[str] = []

    async def before_call(self, call: PendingCall) -> None:
        self.waiting.set()
        await self.go.wait()

    async def after_call(self, call: PendingCall, result: ToolResultInfo) -> None:
        self.told.append("after_call")

    def abandon(self, call: PendingCall) -> None:
        self.told.append("abandon")


async def test_a_run_released_while_its_call_waits_in_a_guard_never_makes_the_call() -> None:
    """A call held up before it is sent (its guards) is not under way: a drain stops it there
    instead of letting it go out late and be cut by the grace."""
    tool, guard = Sends(), Holds()
    executor = ToolExecutor(ToolRegistry([tool]), guards=[guard])
    run = SendsOnce(executor, default_model="x").start(AgentTask(input="x"))
    reader = asyncio.ensure_future(_all_events(run))
    await guard.waiting.wait()
    run.release()
    guard.go.set()
    events = await reader

    assert tool.calls == 0
    assert guard.told == ["abandon"]  # what it held for the call is given back
    assert run.released
    steps = [event.step.type for event in events if isinstance(event, ReasoningStepEvent)]
    assert steps == [StepType.TOOL_CALL]
    assert not any(isinstance(event, DoneEvent) for event in events)


async def test_a_call_held_in_its_guards_when_the_store_goes_away_waits_for_it_to_start() -> None:
    """No call starts while the run's events cannot be stored, also one that passed the run's
    first check before the store went away and then waited in its guards."""
    tool, guard = Sends(), Holds()
    executor = ToolExecutor(ToolRegistry([tool]), guards=[guard])
    run = SendsOnce(executor, default_model="x").start(AgentTask(input="x"))
    store_open = asyncio.Event()
    store_open.set()
    waiting_for_store = asyncio.Event()

    async def stored_through(count: int) -> None:
        return None

    async def ready() -> None:
        if not store_open.is_set():
            waiting_for_store.set()
        await store_open.wait()

    run.store_with(stored_through, ready)
    reader = asyncio.ensure_future(_all_events(run))
    await guard.waiting.wait()  # past the batch's first check, held in its guard
    store_open.clear()  # the store goes away
    sent = asyncio.Event()
    execute = tool.execute

    async def sending(arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        sent.set()
        return await execute(arguments, context)

    tool.execute = sending  # type: ignore[method-assign]
    guard.go.set()
    waits = [asyncio.ensure_future(waiting_for_store.wait()), asyncio.ensure_future(sent.wait())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    assert tool.calls == 0, "the call started while the store was away"
    store_open.set()
    events = await reader

    assert tool.calls == 1
    assert isinstance(events[-1], DoneEvent)


async def test_a_run_released_once_its_call_is_sent_lets_it_finish() -> None:
    tool = Sends()
    sent, answer = asyncio.Event(), asyncio.Event()

    async def execute(arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        tool.calls += 1
        sent.set()
        await answer.wait()
        return ToolOutput("sent")

    tool.execute = execute  # type: ignore[method-assign]
    run = SendsTwice(ToolExecutor(ToolRegistry([tool])), default_model="x").start(
        AgentTask(input="x")
    )
    reader = asyncio.ensure_future(_all_events(run))
    await sent.wait()
    run.release()
    answer.set()
    events = await reader

    assert tool.calls == 1
    assert run.released
    steps = [event.step.type for event in events if isinstance(event, ReasoningStepEvent)]
    # Its result is kept, and the run stops before its next call.
    assert steps == [StepType.TOOL_CALL, StepType.TOOL_RESULT]
    assert not any(isinstance(event, DoneEvent) for event in events)


async def _all_events(run: AgentRun) -> list[object]:
    return [event async for batch in run.event_batches() for event in batch]
