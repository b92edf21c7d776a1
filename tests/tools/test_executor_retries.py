"""The executor's retries: which failures its tool's policy retries, and the backoff between
attempts (exponential up to the cap, or the server's Retry-After), each failure recorded."""

import asyncio
from typing import Any

import pytest

from app.tools.errors import ErrorClass, ToolError, ToolRateLimitError, TransientToolError
from app.tools.models import RetryPolicy, ToolCallContext, ToolOutput
from tests.factories import context_for, new_chain
from tests.tools.executor_helpers import ScriptedTool, _executor


class RecordingSleep:
    """Stands in for asyncio.sleep so backoff delays are observed, not waited for."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


async def test_retryable_failures_back_off_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy(
        max_attempts=5, initial_backoff_s=1.0, multiplier=2.0, max_backoff_s=3.0, jitter=0.0
    )
    errors: list[Exception] = [
        TransientToolError("502"),
        ToolRateLimitError("429"),
        TransientToolError("503"),
        TransientToolError("500"),
    ]
    tool = ScriptedTool(errors, policy)
    sleep = RecordingSleep()
    chain = new_chain()
    result = await _executor(tool, sleep=sleep).execute(chain, context_for(chain), "flaky", {})

    assert result.success
    assert result.info.attempts == 5
    assert tool.attempts == [1, 2, 3, 4, 5]
    assert sleep.delays == [1.0, 2.0, 3.0, 3.0]
    failed = result.info.failed_attempts
    assert [(f.attempt, f.error_class, f.message) for f in failed] == [
        (1, ErrorClass.TRANSIENT, "502"),
        (2, ErrorClass.RATE_LIMIT, "429"),
        (3, ErrorClass.TRANSIENT, "503"),
        (4, ErrorClass.TRANSIENT, "500"),
    ]
    assert [f.backoff_s for f in failed] == [1.0, 2.0, 3.0, 3.0]


async def test_a_servers_retry_after_is_honoured_up_to_the_cap() -> None:
    policy = RetryPolicy(max_attempts=3, initial_backoff_s=0.1, max_backoff_s=5.0, jitter=0.0)
    tool = ScriptedTool(
        [
            ToolRateLimitError("slow down", retry_after_s=2.5),
            ToolRateLimitError("slow down", retry_after_s=60),
        ],
        policy,
    )
    sleep = RecordingSleep()
    chain = new_chain()
    await _executor(tool, sleep=sleep).execute(chain, context_for(chain), "flaky", {})

    assert sleep.delays == [2.5, 5.0]


async def test_retries_stop_at_max_attempts_and_report_every_failure() -> None:
    policy = RetryPolicy(max_attempts=2, initial_backoff_s=0.5, jitter=0.0)
    tool = ScriptedTool(
        [TransientToolError("a"), TransientToolError("b"), TransientToolError("c")], policy
    )
    sleep = RecordingSleep()
    chain = new_chain()
    result = await _executor(tool, sleep=sleep).execute(chain, context_for(chain), "flaky", {})

    assert not result.success
    assert result.error == "b"
    assert result.info.attempts == 2
    assert tool.attempts == [1, 2]
    assert sleep.delays == [0.5]
    assert [f.backoff_s for f in result.info.failed_attempts] == [0.5, None]


@pytest.mark.parametrize(
    "error",
    [
        ToolError("permanent"),
        ToolError("auth", error_class=ErrorClass.PERMANENT, status_code=401),
        TransientToolError("not in this policy's retry_on"),
    ],
)
async def test_errors_the_policy_does_not_name_are_not_retried(error: ToolError) -> None:
    policy = RetryPolicy(max_attempts=4, retry_on=frozenset({ErrorClass.RATE_LIMIT}))
    tool = ScriptedTool([error], policy)
    sleep = RecordingSleep()
    chain = new_chain()
    result = await _executor(tool, sleep=sleep).execute(chain, context_for(chain), "flaky", {})

    assert not result.success
    assert tool.attempts == [1]
    assert sleep.delays == []


async def test_timeouts_are_retried_when_the_policy_says_so() -> None:
    class SlowOnce(ScriptedTool):
        async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
            self.attempts.append(context.attempt)
            if context.attempt == 1:
                await asyncio.Event().wait()  # never set: only the timeout ends it
            return ToolOutput("second time lucky")

    tool = SlowOnce([], RetryPolicy(max_attempts=2, initial_backoff_s=0, jitter=0), timeout_s=0.05)
    chain = new_chain()
    result = await _executor(tool).execute(chain, context_for(chain), "flaky", {})

    assert result.success
    assert result.value == "second time lucky"
    assert [f.error_class for f in result.info.failed_attempts] == [ErrorClass.TIMEOUT]
