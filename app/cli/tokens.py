"""`omniforge token`: a bearer token (HS256) for an existing, active tenant, minted with the
service's own secret."""

import argparse
import asyncio
import sys
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.config import Settings

EXIT_OK, EXIT_FAILED = 0, 1


def add_command(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    token = commands.add_parser(
        "token", help="mint a bearer token (HS256) for an existing, active tenant"
    )
    token.add_argument("--tenant", required=True, help="the tenant id (`tenant_id` claim)")
    token.add_argument("--sub", required=True, help="the user id (`sub` claim)")
    token.add_argument("--roles", default="member", help="comma-separated roles")
    token.add_argument("--ttl", default="1h", type=duration, help="lifetime: 90s, 30m, 12h, 7d")


def duration(text: str) -> timedelta:
    """A lifetime argument: a whole number of seconds, minutes, hours or days (`90s`, `7d`)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    value, unit = text[:-1], text[-1:]
    if unit not in units or not value.isdigit() or int(value) == 0:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (try 90s, 30m, 12h, 7d)")
    return timedelta(seconds=int(value) * units[unit])


def run(args: argparse.Namespace, settings: "Settings") -> int:
    from app.security import mint_token

    refusal = asyncio.run(_token_refusal(settings, args.tenant))
    if refusal is not None:
        print(f"omniforge: {refusal}", file=sys.stderr)
        return EXIT_FAILED
    roles = [role.strip() for role in args.roles.split(",") if role.strip()]
    print(
        mint_token(
            settings.resolved_jwt_secret(),
            tenant_id=args.tenant,
            subject=args.sub,
            roles=roles,
            ttl=args.ttl,
            issuer=settings.jwt_issuer or None,
            audience=settings.jwt_audience or None,
        )
    )
    return EXIT_OK


async def _token_refusal(settings: "Settings", tenant_id: str) -> str | None:
    """Why no token should be minted for `tenant_id` (the API would refuse it), if so. The
    database is migrated first; in development the `default` tenant is made, as the server
    does at start-up."""
    from app.governance.tenants import command_tenant
    from app.storage import Database

    database = Database(settings.resolved_database_url())
    try:
        tenant = await command_tenant(
            database, tenant_id, development=settings.env == "development"
        )
    finally:
        await database.dispose()
    if tenant is None:
        return (
            f"no tenant {tenant_id!r}: create it first with "
            f"`omniforge tenant create NAME --id {tenant_id}`"
        )
    if not tenant.is_active:
        return (
            f"tenant {tenant_id!r} is disabled: enable it with "
            f"`omniforge tenant enable {tenant_id}`"
        )
    return None
