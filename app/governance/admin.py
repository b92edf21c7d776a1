"""`omniforge tenant …`: tenant administration from the command line, straight against the
database (how the first tenants of a production install come to exist). Audited like the API,
with the operating-system user as the actor."""

import argparse
import getpass
import re

from app.chain.models import utc_now
from app.config import Settings
from app.errors import OmniForgeError
from app.governance.audit import AuditAction, audit_row
from app.storage import Database
from app.storage.audit import AuditRepository
from app.storage.records import TenantRecord
from app.storage.tenants import TenantExists, TenantRepository

_TENANT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")


class TenantCommandError(OmniForgeError):
    """A tenant command that cannot be done; the message says why."""


def tenant_id_from(name: str) -> str:
    """`Acme Corp.` → `acme-corp`."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:64].rstrip("-")
    if not slug:
        raise TenantCommandError(f"cannot derive an id from {name!r}; pass --id")
    return slug


async def run_tenant_command(settings: Settings, args: argparse.Namespace) -> list[str]:
    """Runs `args.tenant_command`; returns the lines to print."""
    database = Database(settings.resolved_database_url())
    actor = f"cli:{getpass.getuser()}"
    try:
        async with database.transaction() as connection:
            tenants = TenantRepository(connection)
            if args.tenant_command == "list":
                records = await tenants.page(after=None, limit=100_000)
                return [f"{r.id}\t{r.status}\t{r.name}" for r in records]
            now = utc_now()
            if args.tenant_command == "create":
                tenant_id = args.id or tenant_id_from(args.name)
                if not _TENANT_ID.match(tenant_id):
                    raise TenantCommandError(f"{tenant_id!r} is not a valid tenant id")
                tools = (
                    [t.strip() for t in args.tools.split(",") if t.strip()] if args.tools else None
                )
                try:
                    record = await tenants.create(tenant_id, args.name, at=now, enabled_tools=tools)
                except TenantExists as exc:
                    raise TenantCommandError(str(exc)) from exc
                before: dict[str, object] | None = None
                action = AuditAction.TENANT_CREATE
            else:
                current = await tenants.get(args.id, for_update=True)
                if current is None:
                    raise TenantCommandError(f"no tenant {args.id!r}")
                status = "disabled" if args.tenant_command == "disable" else "active"
                record = await tenants.update(args.id, at=now, status=status)
                before = {"status": current.status}
                action = AuditAction.TENANT_UPDATE
            await AuditRepository(connection, record.id).append(
                [
                    audit_row(
                        actor=actor,
                        action=action,
                        resource_type="tenant",
                        resource_id=record.id,
                        details={"before": before, "after": _summary(record)},
                        at=now,
                    )
                ]
            )
            return [record.id]
    finally:
        await database.dispose()


def _summary(record: TenantRecord) -> dict[str, object]:
    return {
        "id": record.id,
        "name": record.name,
        "status": record.status,
        "enabled_tools": record.enabled_tools,
    }
