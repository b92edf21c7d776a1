"""The executor's guards: each sees a call before it runs and its result after; a rejection is
a failed step that ends the run unless it says otherwise; a call a later guard refuses, or that
is cancelled, is abandoned by the guards that admitted it."""

import asyncio
from dataclasses import replace
from decimal import Decimal

import pytest

from app.chain import ErrorCode
from app.tools.errors import GuardRejection
from app.tools.models import CallEstimate
from app.tools.recording import InMemoryCostRecorder
from tests.factories import context_for, new_chain
from tests.tools.executor_helpers import BlockingTool, EchoTool, RecordingGuard, _executor


async def test_a_guard_a_later_guard_overrules_is_told_to_abandon_the_call() -> None:
    reserving = RecordingGuard()
    refusing = RecordingGuard(GuardRejection(ErrorCode.RATE_LIMITED, "no"))
    chain = new_chain()
    with pytest.raises(GuardRejection):
        await _executor(EchoTool(), guards=[reserving, refusing]).execute(
            chain, context_for(chain), "echo", {"text": "hi"}
        )

    assert reserving.abandoned == ["echo"]
    assert reserving.after == []
    assert refusing.abandoned == []  # it refused: it reserved nothing


async def test_a_cancelled_call_is_abandoned_by_its_guards_and_never_settled() -> None:
    blocking = BlockingTool()
    guard = RecordingGuard()
    chain = new_chain()
    call = asyncio.ensure_future(
        _executor(blocking, guards=[guard]).execute(chain, context_for(chain), "blocking", {})
    )
    await blocking.started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call

    assert guard.abandoned == ["blocking"]
    assert guard.after == []


async def test_a_runs_own_guards_follow_the_executors() -> None:
    shared, own = RecordingGuard(), RecordingGuard()
    chain = new_chain()
    context = replace(context_for(chain), guards=(own,))
    await _executor(EchoTool(), guards=[shared]).execute(chain, context, "echo", {"text": "hi"})

    assert shared.before == own.before == ["echo"]
    assert len(shared.after) == len(own.after) == 1
    assert shared.abandoned == own.abandoned == []


async def test_guards_see_every_call_before_and_its_result_after() -> None:
    guard = RecordingGuard()
    chain = new_chain()
    await _executor(EchoTool(usage=True), guards=[guard]).execute(
        chain, context_for(chain), "echo", {"text": "hi"}
    )

    assert guard.before == ["echo"]
    estimate = CallEstimate(input_tokens=10, max_output_tokens=100, cost_usd=Decimal("0.001"))
    assert guard.estimates == [estimate, estimate]
    [seen] = guard.after
    assert seen.cost_usd == Decimal("0.00007")
    assert seen.input_tokens == 10


async def test_a_guard_rejection_is_a_failed_step_and_ends_the_run_with_its_code() -> None:
    echo = EchoTool()
    guard = RecordingGuard(GuardRejection(ErrorCode.BUDGET_EXCEEDED, "max_cost_usd reached"))
    chain = new_chain()
    with pytest.raises(GuardRejection) as raised:
        await _executor(echo, guards=[guard]).execute(
            chain, context_for(chain), "echo", {"text": "hi"}
        )

    assert raised.value.error_code is ErrorCode.BUDGET_EXCEEDED
    assert echo.calls == []  # refused calls never run
    assert guard.after == []
    result = chain.steps[-1].tool_result
    assert result is not None
    assert not result.success
    assert (result.error_code, result.error) == (
        ErrorCode.BUDGET_EXCEEDED,
        "max_cost_usd reached",
    )


async def test_a_rejection_that_does_not_end_the_run_is_only_a_failed_step() -> None:
    guard = RecordingGuard(
        GuardRejection(ErrorCode.PERMISSION_DENIED, "not for you", ends_run=False)
    )
    chain = new_chain()
    result = await _executor(EchoTool(), guards=[guard]).execute(
        chain, context_for(chain), "echo", {"text": "hi"}
    )
    assert result.error_code is ErrorCode.PERMISSION_DENIED


async def test_an_after_call_rejection_keeps_the_result_and_ends_the_run() -> None:
    recorder = InMemoryCostRecorder()
    guard = RecordingGuard(GuardRejection(ErrorCode.BUDGET_EXCEEDED, "spent"), after=True)
    chain = new_chain()
    with pytest.raises(GuardRejection):
        await _executor(EchoTool(usage=True), guards=[guard], recorder=recorder).execute(
            chain, context_for(chain), "echo", {"text": "hi"}
        )
    result = chain.steps[-1].tool_result
    assert result is not None
    assert result.success
    assert len(recorder.records) == 1  # and so is its cost
