"""Real sandboxes (bubblewrap, the system's Python) for the sandbox tests: each test's own,
each under a host user of its own, stopped after the test."""

import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from app.sandbox import LiveSandbox, SandboxHost, SandboxLimits

StartSandbox = Callable[..., Awaitable[LiveSandbox]]


def free_uid() -> int:
    """A host user id no account and no other test's sandbox uses (the process-count limit
    is per user)."""
    return random.randrange(300_000, 3_000_000)


PACKAGES = Path(__file__).resolve().parents[2] / ".sandbox" / "packages"


def processes_of(uid: int) -> int:
    """How many processes a host user (a sandbox's) has now."""
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                count += os.stat(f"/proc/{name}").st_uid == uid
            except OSError:
                continue
    return count


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
