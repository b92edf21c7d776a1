"""Instances of the service as real `omniforge serve` processes sharing one database: what the
cluster tests start, kill, restart and talk to."""

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import httpx
from sqlalchemy import select

from app.security import mint_token
from app.storage import Database
from app.storage.tables import cost_records, tasks
from app.storage.tenants import TenantRepository
from tests.fakes.openai_server import FakeLLMServer
from tests.service import JWT_SECRET, MODEL, service_settings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Instance:
    """One `omniforge serve` process."""

    name: str
    port: int
    env: dict[str, str]
    process: asyncio.subprocess.Process | None = None
    output: list[str] = field(default_factory=list)
    _drain: asyncio.Task[None] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """What starts the process."""
        return [sys.executable, "-m", "app.cli", "serve", "--port", str(self.port)]

    async def start(self) -> None:
        """Starts the process; returns once it accepts requests."""
        self.process = await asyncio.create_subprocess_exec(
            *self.command(),
            env={**os.environ, **self.env},
            stderr=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
        )
        assert self.process.stderr is not None
        # Started once both are logged, in either order: the app's startup, and its socket
        # bound ("Uvicorn running on": after the startup, or before it when the sockets are
        # bound up front, as with a metrics port).
        waiting = {"Application startup complete", "Uvicorn running on"}
        while waiting:
            line = (await self.process.stderr.readline()).decode()
            self.output.append(line)
            if not line:
                raise AssertionError(f"{self.name} exited before it started:\n{self.log}")
            waiting = {marker for marker in waiting if marker not in line}
        self._drain = asyncio.create_task(self._read_output())

    async def _read_output(self) -> None:
        assert self.process is not None
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.output.append(line.decode())

    @property
    def log(self) -> str:
        return "".join(self.output)

    async def kill(self) -> None:
        """SIGKILL: the process is gone at once, its lease left to lapse."""
        await self._end(signal.SIGKILL)

    async def terminate(self) -> int:
        """SIGTERM: the process drains and hands its runs over; returns its exit code."""
        return await self._end(signal.SIGTERM)

    async def _end(self, sig: signal.Signals) -> int:
        process = self.process
        if process is None:
            return 0
        if process.returncode is not None:
            return process.returncode
        process.send_signal(sig)
        code = await process.wait()
        if self._drain is not None:
            await self._drain
        return code

    def client(self, token: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )


@dataclass
class Cluster:
    """Instances on one database, and a tenant with a member's token."""

    database_url: str
    directory: Path
    fake_llm: FakeLLMServer
    tenant: str
    token: str
    env: dict[str, str]
    stack: AsyncExitStack
    instances: list[Instance] = field(default_factory=list)

    async def instance(self, name: str, **env: str) -> Instance:
        started = Instance(name, free_port(), {**self.env, **env})
        await started.start()
        self.instances.append(started)
        return started

    def token_for(self, sub: str = "alice", roles: tuple[str, ...] = ("member",)) -> str:
        return mint_token(JWT_SECRET, tenant_id=self.tenant, subject=sub, roles=roles)

    async def task_rows(self) -> list[Any]:
        return await task_rows(self.database_url, self.tenant)

    async def cost_rows(self, task_id: UUID | str) -> list[Any]:
        database = Database(self.database_url)
        try:
            async with database.read() as connection:
                statement = select(cost_records).where(cost_records.c.task_id == UUID(str(task_id)))
                return list((await connection.execute(statement)).all())
        finally:
            await database.dispose()


async def create_tenant(database_url: str) -> str:
    """A new tenant with every tool enabled, stored directly (no instance may run yet)."""
    tenant = f"t-{uuid4().hex[:12]}"
    database = Database(database_url)
    try:
        async with database.transaction() as connection:
            await TenantRepository(connection).create(
                tenant, f"Tenant {tenant}", at=datetime.now(UTC), enabled_tools=None
            )
    finally:
        await database.dispose()
    return tenant


async def task_rows(database_url: str, tenant: str) -> list[Any]:
    """The tenant's stored task rows."""
    database = Database(database_url)
    try:
        async with database.read() as connection:
            statement = select(tasks).where(tasks.c.tenant_id == tenant)
            return list((await connection.execute(statement)).all())
    finally:
        await database.dispose()


@asynccontextmanager
async def cluster(
    database_url: str, directory: Path, fake_llm: FakeLLMServer, **env: str
) -> AsyncIterator[Cluster]:
    """A tenant on `database_url` and a way to start instances on it; every instance still
    running is killed at the end."""
    settings = service_settings(directory, database_url, fake_llm)
    tenant = await create_tenant(database_url)
    base_env = {
        "OMNIFORGE_ENV": "development",
        "OMNIFORGE_DATABASE_URL": database_url,
        "OMNIFORGE_DATA_DIR": str(directory),
        "OMNIFORGE_JWT_SECRET": JWT_SECRET,
        "OMNIFORGE_MODELS_FILE": str(settings.models_file),
        "OMNIFORGE_DEFAULT_MODEL": MODEL,
        "OMNIFORGE_LLM_MAX_ATTEMPTS": "1",
        **env,
    }
    token = mint_token(JWT_SECRET, tenant_id=tenant, subject="alice", roles=("member",))
    async with AsyncExitStack() as stack:
        group = Cluster(database_url, directory, fake_llm, tenant, token, base_env, stack)
        try:
            yield group
        finally:
            for instance in group.instances:
                await instance.kill()


def same_conversation(one: list[dict[str, Any]], other: list[dict[str, Any]]) -> bool:
    """Whether two requests' messages say the same: tool results as JSON values (a stored
    result's keys may come back in another order: JSON objects have none)."""

    def normal(message: dict[str, Any]) -> dict[str, Any]:
        content = message.get("content")
        if message.get("role") == "tool" and isinstance(content, str):
            try:
                return {**message, "content": json.loads(content)}
            except ValueError:
                return message
        return message

    return [normal(m) for m in one] == [normal(m) for m in other]
