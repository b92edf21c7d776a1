"""`omniforge tenant create|list|disable|enable`: the tenants, in-process on the configured
database (migrated first)."""

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from app.cli.service import migrate_database

if TYPE_CHECKING:
    from app.config import Settings

EXIT_OK, EXIT_FAILED = 0, 1


def add_command(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    tenant = commands.add_parser("tenant", help="create, list, disable or enable tenants")
    tenant_commands = tenant.add_subparsers(dest="tenant_command", required=True)
    create = tenant_commands.add_parser("create", help="create a tenant; prints its id")
    create.add_argument("name", help="its display name")
    create.add_argument("--id", help="the id tokens carry (default: derived from the name)")
    create.add_argument("--tools", help="comma-separated tools its runs may use (default: all)")
    tenant_commands.add_parser("list", help="list tenants: id, status, name")
    for verb in ("disable", "enable"):
        command = tenant_commands.add_parser(verb, help=f"{verb} a tenant")
        command.add_argument("id", help="the tenant id")


def run(args: argparse.Namespace, settings: "Settings") -> int:
    from app.governance.admin import TenantCommandError, run_tenant_command

    migrate_database(settings)
    try:
        lines = asyncio.run(run_tenant_command(settings, args))
    except TenantCommandError as exc:
        print(f"omniforge: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for line in lines:
        print(line)
    return EXIT_OK
