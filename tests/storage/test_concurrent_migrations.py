"""Migrators of one database take turns: replicas started together on an empty database all
migrate it without error, and it ends at the head revision, once."""

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from uuid import uuid4

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.storage import Database, head_revision
from tests.conftest import POSTGRES_ADMIN_URL

MIGRATORS = 4


@pytest.fixture(params=["sqlite", "postgres"])
async def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A database with nothing in it, not even `alembic_version`; dropped after."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
        return
    name = f"omniforge_test_{uuid4().hex[:12]}"
    admin = await asyncpg.connect(POSTGRES_ADMIN_URL, timeout=5)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = make_url(POSTGRES_ADMIN_URL).set(drivername="postgresql+asyncpg", database=name)
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        admin = await asyncpg.connect(POSTGRES_ADMIN_URL, timeout=5)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


# One migrator: imports first, says so, and migrates when told to, so that every migrator
# starts its migration at the same moment (as replicas of one rollout do, give or take).
MIGRATOR = """
import asyncio, sys
from app.storage import Database, upgrade_to_head

async def main() -> None:
    database = Database(sys.argv[1])
    try:
        await upgrade_to_head(database)
    finally:
        await database.dispose()

print("ready", flush=True)
sys.stdin.readline()
asyncio.run(main())
"""


async def test_concurrent_migrations_of_an_empty_database_all_succeed_and_leave_one_head_revision(
    empty_database_url: str,
) -> None:
    migrators = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            MIGRATOR,
            empty_database_url,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(MIGRATORS)
    ]
    try:
        async with asyncio.timeout(60):
            for migrator in migrators:
                assert migrator.stdout is not None
                assert await migrator.stdout.readline() == b"ready\n"
            for migrator in migrators:
                assert migrator.stdin is not None
                migrator.stdin.write(b"go\n")
            outcomes = [await migrator.communicate() for migrator in migrators]
    finally:
        for migrator in migrators:
            if migrator.returncode is None:
                migrator.kill()
                await migrator.wait()

    failures = [
        err.decode() for (_, err), m in zip(outcomes, migrators, strict=True) if m.returncode
    ]
    assert failures == []
    database = Database(empty_database_url)
    try:
        async with database.read() as connection:
            versions = await connection.execute(text("SELECT version_num FROM alembic_version"))
            revisions = versions.scalars().all()
    finally:
        await database.dispose()
    assert revisions == [head_revision()]
