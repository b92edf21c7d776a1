"""Sandboxes: isolated, metered places to run code and commands (bubblewrap on Linux)."""

from app.sandbox.bubblewrap import (
    Execution,
    SandboxFailed,
    SandboxHost,
    SandboxLimits,
    SandboxUnavailable,
)
from app.sandbox.live import LiveSandbox
from app.sandbox.pool import LiveInfo, SandboxesBusy, SandboxPool

__all__ = [
    "Execution",
    "LiveInfo",
    "LiveSandbox",
    "SandboxFailed",
    "SandboxHost",
    "SandboxLimits",
    "SandboxPool",
    "SandboxUnavailable",
    "SandboxesBusy",
]
