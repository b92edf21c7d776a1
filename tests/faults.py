"""Servers a test owns and may break: a private Postgres cluster it can stop (`-m immediate`)
and start again on the same port with the same data, and a `redis-server` it can kill and start
again empty. Never the shared servers of the machine."""

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg

from tests.cluster import free_port


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found is not None:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not versions:
        raise AssertionError(f"no PostgreSQL server binary {name!r}: install postgresql")
    return str(versions[-1])


class PrivatePostgres:
    """A Postgres cluster of this test's own, on a free port of 127.0.0.1 (trust auth, user
    `postgres`). `stop()` kills it the hard way by default (what a crash or a fail-over does to
    its clients); `start()` brings it back on the same port with its data."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self._as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        """A SQLAlchemy URL of one of its databases."""
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    async def init(self) -> None:
        if self._as_postgres:  # initdb refuses root: the cluster belongs to `postgres`
            shutil.chown(self.directory, "postgres")
        await self._run(
            _pg_bin("initdb"),
            "-D",
            str(self.directory / "data"),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
        )
        await self.start()

    async def start(self) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.directory} -c fsync=off "
            "-c max_connections=300"
        )
        await self._run(
            _pg_bin("pg_ctl"),
            "-D",
            str(self.directory / "data"),
            "-w",
            "-l",
            str(self.directory / "log"),
            "-o",
            options,
            "start",
        )

    async def stop(self, mode: str = "immediate") -> None:
        await self._run(
            _pg_bin("pg_ctl"), "-D", str(self.directory / "data"), "-m", mode, "-w", "stop"
        )

    async def create_database(self, name: str) -> str:
        """Creates a database; returns its SQLAlchemy URL."""
        connection = await asyncpg.connect(self.admin_url)
        try:
            await connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            await connection.close()
        return self.url(name)

    async def _run(self, *command: str) -> None:
        process = await asyncio.create_subprocess_exec(
            *self._as_postgres,
            *command,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await process.communicate()
        if process.returncode != 0:
            raise AssertionError(f"{' '.join(command)} failed: {err.decode()}")


@asynccontextmanager
async def private_postgres() -> AsyncIterator[PrivatePostgres]:
    """A private cluster for the block; stopped and removed at its end."""
    directory = Path(tempfile.mkdtemp(prefix="omniforge-chaos-pg."))
    server = PrivatePostgres(directory)
    try:
        await server.init()
        yield server
    finally:
        with contextlib.suppress(AssertionError):  # already stopped
            await server.stop()
        shutil.rmtree(directory, ignore_errors=True)


class PrivateRedis:
    """A `redis-server` of this test's own on a free port, keeping nothing on disk: `kill()`
    is SIGKILL, and `start()` after it brings back an empty server on the same port."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self._process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        server = shutil.which("redis-server")
        if server is None:
            raise AssertionError("no redis-server: install redis-server")
        self._process = await asyncio.create_subprocess_exec(
            server,
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert self._process.stdout is not None
        while b"Ready to accept connections" not in (line := await self._process.stdout.readline()):
            if not line:
                raise AssertionError("redis-server exited before it was ready")
        self._drain = asyncio.ensure_future(self._process.stdout.read())

    async def kill(self) -> None:
        process = self._process
        if process is not None and process.returncode is None:
            process.send_signal(signal.SIGKILL)
            await process.wait()
            await self._drain


@asynccontextmanager
async def private_redis() -> AsyncIterator[PrivateRedis]:
    directory = Path(tempfile.mkdtemp(prefix="omniforge-chaos-redis."))
    server = PrivateRedis(directory)
    try:
        await server.start()
        yield server
    finally:
        await server.kill()
        shutil.rmtree(directory, ignore_errors=True)
