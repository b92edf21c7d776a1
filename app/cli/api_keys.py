"""`omniforge api-key create`: the first API key of a tenant (later ones are made over the
API by its admins), in-process on the configured database. Prints the secret, once."""

import argparse
import asyncio
import sys
from datetime import timedelta
from typing import TYPE_CHECKING

from app.cli.tokens import duration

if TYPE_CHECKING:
    from app.config import Settings
    from app.storage.records import ApiKeyRecord

EXIT_OK, EXIT_FAILED = 0, 1
# Who created a key made on the service's machine, as its audit row and listing say.
CLI_CREATOR = "cli"


def add_command(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    keys = commands.add_parser("api-key", help="create an API key for a tenant")
    verbs = keys.add_subparsers(dest="api_key_command", required=True)
    create = verbs.add_parser(
        "create", help="create a key; prints its secret (shown only this once) on stdout"
    )
    create.add_argument("--tenant", required=True, help="the tenant id")
    create.add_argument("--name", required=True, help="what the key is for")
    create.add_argument(
        "--roles", default="tenant_admin", help="comma-separated roles (default: tenant_admin)"
    )
    create.add_argument(
        "--expires-in", type=duration, help="lifetime: 90s, 30m, 12h, 7d (default: none)"
    )


def run(args: argparse.Namespace, settings: "Settings") -> int:
    from app.security.rbac import Role

    roles = sorted({role.strip() for role in args.roles.split(",") if role.strip()})
    unknown = [role for role in roles if role not in {r.value for r in Role}]
    if not roles or unknown:
        known = ", ".join(role.value for role in Role)
        print(f"omniforge: unknown roles {unknown or roles}; known: {known}", file=sys.stderr)
        return EXIT_FAILED
    outcome = asyncio.run(_create(settings, args.tenant, args.name, roles, args.expires_in))
    if isinstance(outcome, str):
        print(f"omniforge: {outcome}", file=sys.stderr)
        return EXIT_FAILED
    record, secret = outcome
    print(secret)
    print(
        f"key {record.prefix} ({record.name}) of tenant {record.tenant_id}, roles "
        f"{', '.join(record.roles)}: store the secret now, it is not shown again",
        file=sys.stderr,
    )
    return EXIT_OK


async def _create(
    settings: "Settings", tenant_id: str, name: str, roles: list[str], lifetime: timedelta | None
) -> "tuple[ApiKeyRecord, str] | str":
    """The key and its secret, or why none was made."""
    from app.chain.models import utc_now
    from app.governance.api_keys import ApiKeys
    from app.governance.callers import Caller
    from app.governance.tenants import command_tenant
    from app.resources.api_keys import ApiKeyService
    from app.security import Principal
    from app.security.rbac import Role, permissions_of
    from app.storage import Database

    database = Database(settings.resolved_database_url())
    try:
        tenant = await command_tenant(
            database, tenant_id, development=settings.env == "development"
        )
        if tenant is None:
            return f"no tenant {tenant_id!r}: create it first with `omniforge tenant create`"
        if not tenant.is_active:
            return f"tenant {tenant_id!r} is disabled"
        # Whoever runs commands on the service's machine is its operator.
        operator = frozenset({Role.PLATFORM_ADMIN.value})
        principal = Principal(subject=CLI_CREATOR, tenant_id=tenant.id, roles=operator)
        keys = ApiKeyService(database, ApiKeys(database, ttl_s=0))
        return await keys.create(
            Caller(principal, tenant, permissions_of(operator)),
            tenant,
            name=name,
            roles=roles,
            expires_at=None if lifetime is None else utc_now() + lifetime,
        )
    finally:
        await database.dispose()
