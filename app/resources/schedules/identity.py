"""Whom a schedule's tasks run as.

A schedule runs as the user who made it, with the roles (and the API key) it had then, as a
queued task runs as its submitter: its tasks count against that user's and key's limits and
are theirs to read and cancel. A revoked or expired key, or a suspended tenant, stops its
firings (each then records why)."""

from app.chain.models import utc_now
from app.governance.api_keys import ApiKeys
from app.governance.callers import Caller
from app.governance.tenants import TenantDirectory
from app.resources.schedules.scheduler import FiringRefused
from app.resources.schedules.store import ScheduleRecord
from app.security import Principal
from app.security.rbac import permissions_of
from app.storage.api_key_lookups import key_by_id
from app.storage.database import Database


async def runs_as(
    schedule: ScheduleRecord, *, database: Database, tenants: TenantDirectory, api_keys: ApiKeys
) -> Caller:
    """The caller a schedule's tasks are submitted as (`FiringRefused` when it can no longer
    act)."""
    tenant = await tenants.get(schedule.tenant_id)
    if tenant is None or not tenant.is_active:
        raise FiringRefused(f"tenant {schedule.tenant_id} is suspended or gone")
    key = None
    if schedule.api_key_id is not None:
        async with database.read() as connection:
            record = await key_by_id(connection, schedule.api_key_id)
        now = utc_now()
        if record is None or record.revoked_at is not None:
            raise FiringRefused("the API key the schedule was made with is revoked")
        if record.expires_at is not None and record.expires_at <= now:
            raise FiringRefused("the API key the schedule was made with has expired")
        key = await api_keys.grant(schedule.api_key_id)
    roles = frozenset(schedule.roles)
    principal = Principal(
        subject=schedule.created_by,
        tenant_id=schedule.tenant_id,
        roles=roles,
        api_key=None if schedule.api_key_id is None else str(schedule.api_key_id),
    )
    return Caller(principal, tenant, permissions_of(roles), key)
