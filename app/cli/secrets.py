"""`omniforge secrets rotate`: seals every tenant secret again under the first key of
`OMNIFORGE_SECRETS_KEY`, in-process on the configured database. The procedure: set
`OMNIFORGE_SECRETS_KEY=NEW,OLD` on every instance and deploy (the new key seals, both open),
run this command, then drop the old key.

`omniforge secrets scope TENANT NAME`: sets who may use a secret (its `usable_by`), as
`PATCH /api/v1/tenants/{tenant}/secrets/{name}` does, audited as the operator's change."""

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.config import Settings
    from app.resources.secrets import Rotation

EXIT_OK, EXIT_FAILED = 0, 1


def add_command(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    secrets = commands.add_parser("secrets", help="manage the keys of tenant secrets")
    verbs = secrets.add_subparsers(dest="secrets_command", required=True)
    rotate = verbs.add_parser(
        "rotate",
        help="seal every secret again under the first key of OMNIFORGE_SECRETS_KEY, so that "
        "the others can be dropped",
    )
    rotate.add_argument(
        "--batch-size",
        type=_positive,
        default=100,
        help="secrets sealed again per transaction (default: 100)",
    )
    scope = verbs.add_parser(
        "scope",
        help="set who may use a tenant secret: its agents, roles, tools, MCP servers and remote "
        "agents (each list given restricts; none given: anyone of the tenant)",
    )
    scope.add_argument("tenant", help="the tenant's id")
    scope.add_argument("name", help="the secret's name")
    for flag, what in _SCOPE_FLAGS.items():
        scope.add_argument(
            f"--{flag.replace('_', '-')}",
            type=_names,
            default=[],
            metavar="NAME,...",
            help=f"{what}, comma-separated",
        )


_SCOPE_FLAGS = {
    "agents": "the agents whose runs may use it",
    "roles": "the roles, any one of which a run's caller needs",
    "tools": "the tools that may send it (e.g. http_request)",
    "mcp_servers": "the MCP servers that may send it",
    "remote_agents": "the remote agents that may send it",
}
EXIT_NOT_FOUND = 2


def run(args: argparse.Namespace, settings: "Settings") -> int:
    """Runs `omniforge secrets rotate` (the counts on stdout, each secret no configured key
    opens on stderr, then the status is 1: an old key was dropped too soon) or `omniforge
    secrets scope` (the secret's scope on stdout as JSON; status 2 for an unknown secret, 1
    for an invalid scope)."""
    if args.secrets_command == "scope":
        return _scope(args, settings)
    rotation = asyncio.run(_rotate(settings, args.batch_size))
    print(
        f"sealing key {rotation.key_id}: {rotation.resealed} secrets sealed again in "
        f"{rotation.batches} batches; {len(rotation.unreadable)} no configured key opens"
    )
    for line in rotation.unreadable:
        print(f"omniforge: cannot open {line}", file=sys.stderr)
    return EXIT_FAILED if rotation.unreadable else EXIT_OK


async def _rotate(settings: "Settings", batch_size: int) -> "Rotation":
    from app.resources.secrets import SecretVault
    from app.storage import Database, upgrade_to_head

    database = Database(settings.resolved_database_url())
    try:
        await upgrade_to_head(database)
        return await SecretVault.from_settings(database, settings).rotate(batch_size=batch_size)
    finally:
        await database.dispose()


def _scope(args: argparse.Namespace, settings: "Settings") -> int:
    from pydantic import ValidationError

    from app.resources.secrets import UsableBy

    given = {flag: getattr(args, flag) for flag in _SCOPE_FLAGS}
    try:
        usable_by = UsableBy.model_validate(given)
    except ValidationError as exc:
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"])
            print(f"omniforge: --{field.replace('_', '-')}: {error['msg']}", file=sys.stderr)
        return EXIT_FAILED
    document = usable_by.model_dump() if any(given.values()) else None
    found = asyncio.run(_set_scope(settings, args.tenant, args.name, document))
    if not found:
        print(f"omniforge: tenant {args.tenant!r} has no secret {args.name!r}", file=sys.stderr)
        return EXIT_NOT_FOUND
    print(json.dumps({"name": args.name, "usable_by": document}))
    return EXIT_OK


async def _set_scope(
    settings: "Settings", tenant_id: str, name: str, usable_by: dict[str, Any] | None
) -> bool:
    from app.chain.models import utc_now
    from app.governance.audit import AuditAction, audit_row
    from app.resources.secrets.store import SecretRepository
    from app.storage import Database, upgrade_to_head
    from app.storage.audit import AuditRepository

    database = Database(settings.resolved_database_url())
    try:
        await upgrade_to_head(database)
        async with database.transaction() as connection:
            secrets = SecretRepository(connection, tenant_id)
            before = await secrets.get(name)
            at = utc_now()
            record = await secrets.set_usable_by(name, usable_by, by=_OPERATOR, at=at)
            if before is None or record is None:
                return False
            row = audit_row(
                actor=_OPERATOR,
                action=AuditAction.SECRET_SCOPE,
                resource_type="secret",
                resource_id=name,
                details={
                    "before": {"name": name, "usable_by": before.usable_by},
                    "after": {"name": name, "usable_by": usable_by},
                },
                at=at,
            )
            await AuditRepository(connection, tenant_id).append([row])
        return True
    finally:
        await database.dispose()


# Who the audit log names for a change made with the CLI (on the service's host).
_OPERATOR = "omniforge-cli"


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"not a positive whole number: {text!r}")
    return int(text)
