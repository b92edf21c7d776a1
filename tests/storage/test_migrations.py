"""The migrations are the schema: they match the table definitions and go down and up again."""

from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect

from app.storage import Database, current_revision, head_revision, upgrade_to_head
from app.storage.migrate import alembic_config
from app.storage.tables import described, metadata

TABLES = {
    "tenants",
    "tasks",
    "reasoning_chains",
    "reasoning_steps",
    "task_events",
    "cost_records",
    "model_usage",
    "audit_events",
}


async def test_the_migrated_schema_is_exactly_the_table_definitions(database_url: str) -> None:
    def differences(connection: Connection) -> list[object]:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "include_name": described}
        )
        return list(compare_metadata(context, metadata))

    database = Database(database_url)
    try:
        assert await current_revision(database) == head_revision()
        async with database.read() as connection:
            tables = await connection.run_sync(lambda c: set(inspect(c).get_table_names()))
            diff = await connection.run_sync(differences)
    finally:
        await database.dispose()
    assert tables >= TABLES
    assert diff == []


async def test_migrations_go_down_to_nothing_and_up_again(tmp_path: Path) -> None:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'roundtrip.db'}")

    def downgrade(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, "base")

    try:
        await upgrade_to_head(database)
        async with database.transaction() as connection:
            await connection.run_sync(downgrade)
        async with database.read() as connection:
            left = await connection.run_sync(lambda c: set(inspect(c).get_table_names()))
        assert left & TABLES == set()
        await upgrade_to_head(database)
        assert await current_revision(database) == head_revision()
    finally:
        await database.dispose()
