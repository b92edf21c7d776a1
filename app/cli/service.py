"""`omniforge serve|migrate|openapi`: the service itself, its database schema and its API
document."""

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.config import Settings

EXIT_OK = 0


def add_serve_commands(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    serve = commands.add_parser("serve", help="migrate the database, then serve the HTTP API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    commands.add_parser("migrate", help="bring the database schema to the latest revision")


def add_openapi_command(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    openapi = commands.add_parser("openapi", help="print the API's OpenAPI document")
    openapi.add_argument("--output", type=Path, help="write it here (openapi/openapi.json)")


def serve(args: argparse.Namespace, settings: "Settings") -> int:
    import logging.config

    from app.api import create_app, listeners
    from app.observability.json_logs import json_log_config

    if settings.log_format == "json":
        # Every line JSON from the first, the migration's included.
        logging.config.dictConfig(json_log_config())
    url = migrate_database(settings)
    if settings.log_format == "json":
        logging.getLogger("app.cli").info("database %s is at the latest schema", url)
    else:
        print(f"omniforge: database {url} is at the latest schema", file=sys.stderr)
    listeners.serve(
        create_app(settings),
        host=args.host,
        port=args.port,
        metrics_port=settings.metrics_port,
        grace_s=settings.shutdown_grace_s,
    )
    return EXIT_OK


def migrate(args: argparse.Namespace, settings: "Settings") -> int:
    url = migrate_database(settings)
    print(f"omniforge: database {url} is at the latest schema", file=sys.stderr)
    return EXIT_OK


def migrate_database(settings: "Settings") -> str:
    """Brings the configured database to the latest schema; its URL, the password hidden."""
    from app.storage import Database, upgrade_to_head

    async def migrate() -> str:
        database = Database(settings.resolved_database_url())
        try:
            await upgrade_to_head(database)
        finally:
            await database.dispose()
        return database.url.render_as_string(hide_password=True)

    return asyncio.run(migrate())


def openapi(args: argparse.Namespace, settings: "Settings") -> int:
    from app.api.openapi import openapi_json

    document = openapi_json(settings)
    if args.output is None:
        sys.stdout.write(document)
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(document, encoding="utf-8")
    return EXIT_OK
