"""`omniforge token`: a bearer token (HS256) for a tenant, minted with the service's own
secret. It is a signature and nothing more: no database is read (a command that needs the
signing key alone starts in a fraction of a second); the service refuses the token of a tenant
that is unknown or disabled when it is used."""

import argparse
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.config import Settings

EXIT_OK = 0


def add_command(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    token = commands.add_parser(
        "token", help="mint a bearer token (HS256) for a tenant (no database is read)"
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
