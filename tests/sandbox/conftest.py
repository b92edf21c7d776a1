"""Real sandboxes (bubblewrap, the system's Python) for the sandbox tests: each test's own,
each under a host user of its own, stopped after the test."""

import random
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from app.sandbox import LiveSandbox, SandboxHost, SandboxLimits
from app.sandbox.procs import processes_of as user_processes

StartSandbox = Callable[..., Awaitable[LiveSandbox]]


def free_uid() -> int:
    """A host user id no account and no other test's sandbox uses (the process-count limit
    is per user)."""
    return random.randrange(300_000, 3_000_000)


PACKAGES = Path(__file__).resolve().parents[2] / ".sandbox" / "packages"


def processes_of(uid: int) -> int:
    """How many processes a host user (a sandbox's) has now."""
    return sum(1 for _ in user_processes(uid))


@pytest.fixture
def host() -> SandboxHost:
    if not PACKAGES.is_dir():
        pytest.fail(
            f"{PACKAGES} is missing: scripts/test installs the sandboxes' packages there "
            "(requirements/sandbox.lock)",
            pytrace=False,
        )
    host = SandboxHost(packages=PACKAGES)
    host.check()  # fails, saying what to install, where bubblewrap is missing
    return host


@pytest.fixture
async def start_sandbox(host: SandboxHost) -> AsyncIterator[StartSandbox]:
    started: list[LiveSandbox] = []

    async def start(**limits: float) -> LiveSandbox:
        sandbox = LiveSandbox(host, SandboxLimits(**limits), free_uid())  # type: ignore[arg-type]
        await sandbox.start()
        started.append(sandbox)
        return sandbox

    yield start
    for sandbox in started:
        await sandbox.close()
