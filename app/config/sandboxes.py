"""Sandboxes: where code and commands of `run_code` and `run_shell` run, and their limits."""

from decimal import Decimal
from pathlib import Path
from typing import Literal

from pydantic import Field

from app.config.values import Section


class SandboxSettings(Section):
    """Sandboxed workspaces (bubblewrap)."""

    sandboxes: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="`auto`: the sandbox tools (`run_code`, `run_shell`, `workspace_files`) "
        "exist when this host can run sandboxes (bubblewrap, the system's Python 3), else "
        "the service starts without them and logs why; `on`: it must (start-up fails "
        "otherwise); `off`: never.",
    )
    sandbox_packages_dir: Path | None = Field(
        default=None,
        description="The Python packages sandboxes can import (requirements/sandbox.lock; "
        "scripts/run installs them in .sandbox/packages, the default when it exists).",
    )
    sandbox_first_uid: int = Field(
        default=200_000,
        ge=1_000,
        description="Sandboxes run as host users from this id on, one per live sandbox: ids "
        "no account on the host uses.",
    )
    sandbox_max_live: int = Field(
        default=32, ge=1, le=4_096, description="Live sandboxes per process at most."
    )
    sandbox_idle_s: float = Field(
        default=900.0,
        gt=0,
        description="A sandbox unused this long is stopped (its workspace's snapshot stays).",
    )
    sandbox_cpu_share: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="The share of the host's CPUs all of a process's sandboxes together may "
        "use, where the host lets the service make a CPU cgroup (as root); elsewhere their "
        "lower priority (nice 10) alone yields the CPU to the service.",
    )
    sandbox_cpu_s: float = Field(
        default=30.0, gt=0, le=3_600, description="CPU seconds of one sandbox call at most."
    )
    sandbox_wall_s: float = Field(
        default=60.0, gt=0, le=3_600, description="Wall-clock seconds of one sandbox call at most."
    )
    sandbox_memory_mb: int = Field(
        default=1_024, ge=64, description="Address space of one sandbox process at most."
    )
    sandbox_processes: int = Field(
        default=64, ge=4, le=4_096, description="Processes of one sandbox at once at most."
    )
    sandbox_cpu_second_usd: Decimal = Field(
        default=Decimal(0),
        ge=0,
        max_digits=24,
        decimal_places=12,
        description="The price of one CPU second of a sandbox call, in USD: each call's cost "
        "record, the cost reports and `max_cost_usd` budgets count it (its seconds too, in "
        "`sandbox_s`).",
    )
    sandbox_workspace_mb: int = Field(
        default=256, ge=1, description="A workspace's files at most (its size in memory)."
    )
