"""Alembic, driven from async code: the schema is only ever built by these migrations."""

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

from app.storage.database import Database

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


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


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def upgrade_to_head(database: Database) -> None:
    """Runs every pending migration on the database, in one transaction."""

    def upgrade(connection: Connection) -> None:
        config = alembic_config()
        # env.py uses this connection instead of opening its own event loop.
        config.attributes["connection"] = connection
        command.upgrade(config, "head")

    async with database.transaction() as connection:
        await connection.run_sync(upgrade)


async def current_revision(database: Database) -> str | None:
    def revision(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with database.read() as connection:
        return await connection.run_sync(revision)
