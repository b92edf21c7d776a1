"""Alembic, driven from async code: the schema is only ever built by these migrations."""

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.database import SQLITE_BUSY_TIMEOUT_MS, Database

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# The Postgres advisory lock held while migrating ("omniforg" in ASCII): one key for every
# process of every version, so that any two migrators of one database take turns.
MIGRATION_LOCK_KEY = 0x6F6D6E69666F7267
# How long a SQLite migrator waits for the others (a request waits `SQLITE_BUSY_TIMEOUT_MS`).
MIGRATION_WAIT_MS = 120_000


def alembic_config(url: str | None = None) -> Config:
    """The Alembic configuration of the package (no alembic.ini needed at run time)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option(
        "file_template",
        "%%(year)d_%%(month).2d_%%(day).2d_%%(hour).2d%%(minute).2d_%%(rev)s_%%(slug)s",
    )
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


@cache
def head_revision() -> str | None:
    """The newest migration's revision. Once per process: Alembic reads and runs every
    migration file to learn it (tens of ms), and readiness asks at every probe."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def upgrade_to_head(database: Database) -> None:
    """Runs every pending migration on the database, in one transaction that holds the
    database's migration lock: processes migrating one database at once (replicas started
    together) take turns, and those after the first find nothing left to do."""

    def upgrade(connection: Connection) -> None:
        config = alembic_config()
        # env.py uses this connection instead of opening its own event loop.
        config.attributes["connection"] = connection
        command.upgrade(config, "head")

    async with database.transaction() as connection:
        await _lock_for_migrations(connection)
        try:
            await connection.run_sync(upgrade)
        finally:
            if connection.dialect.name == "sqlite":  # back to a request's wait, for the pool
                await connection.exec_driver_sql(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")


async def _lock_for_migrations(connection: AsyncConnection) -> None:
    """Takes the lock that serialises migrations, for the rest of the transaction."""
    if connection.dialect.name == "postgresql":
        # A transaction-level advisory lock: released by the commit (or rollback), and
        # scoped by Postgres to this database.
        await connection.execute(
            text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
        )
    elif connection.dialect.name == "sqlite":
        # The sqlite3 module begins no transaction before DDL, so each CREATE would commit on
        # its own and two migrators would both create the same table. Begin one that holds
        # the write lock from its start; another migrator waits for it, and the migration
        # becomes atomic. Replicas started together each wait for all the others' whole
        # migrations: longer than a request waits for a write (restored after the commit).
        await connection.exec_driver_sql(f"PRAGMA busy_timeout={MIGRATION_WAIT_MS}")
        await connection.exec_driver_sql("BEGIN IMMEDIATE")


async def current_revision(database: Database) -> str | None:
    def revision(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with database.read() as connection:
        return await connection.run_sync(revision)
