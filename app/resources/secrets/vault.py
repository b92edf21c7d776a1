"""A tenant's secrets: sealed at rest, opened for runs from a short per-process cache, and
learnt by the process's log masker as they are opened. Each use is checked against the
secret's `usable_by` and, within a run, audited under the run's caller."""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from app.caches import TtlCache
from app.chain import ErrorCode
from app.chain.models import utc_now
from app.config import Settings
from app.governance.audit import AuditAction, audit_row
from app.resources.secrets.scopes import UsableBy, refusal
from app.resources.secrets.store import SecretRecord, SecretRepository
from app.security.log_masking import SecretMasker
from app.security.redaction import Redactor
from app.security.secrets import KeyRing, Sealed, SecretUnreadable
from app.storage.audit import AuditRepository
from app.storage.database import Database
from app.storage.tenants import TenantRepository
from app.tools.errors import ToolError
from app.tools.header_values import PROBLEM, sendable
from app.tools.services import MASK, MIN_MASKED_CHARS, SecretResolver, SecretUse

logger = logging.getLogger(__name__)

# Tenants whose opened secrets, and whose compiled maskers, are kept at most.
MAX_CACHED_TENANTS = 10_000
# Tenants read at once while rotating.
_TENANT_PAGE = 500


@dataclass(slots=True)
class Rotation:
    """What a rotation did: secrets sealed again under the sealing key, and those that no
    configured key opens (`tenant/name: why`), left as they were."""

    key_id: str
    resealed: int = 0
    unreadable: list[str] = field(default_factory=list)
    batches: int = 0


@dataclass(frozen=True, slots=True)
class OpenedSecrets:
    """A tenant's secrets as one moment's read found them: values by name, the names of
    those that did not open (with why), and who may use each (absent: anyone)."""

    values: dict[str, str]
    unreadable: dict[str, str]
    scopes: dict[str, UsableBy] = field(default_factory=dict)


# Records one use of a secret: its name, the use, and why it was refused (None: it was not).
UseRecorder = Callable[[str, SecretUse, str | None], Awaitable[None]]


class TenantSecrets:
    """One run's `SecretResolver`: its tenant's secrets as they were when the run began.
    Each use is checked against the secret's scope; those made within a run (a task named)
    are handed to `record_use`."""

    def __init__(
        self,
        opened: OpenedSecrets,
        record_use: UseRecorder | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self._opened = opened
        self._record_use = record_use
        self._redactor = redactor or Redactor(
            opened.values.values(), mask=MASK, min_chars=MIN_MASKED_CHARS
        )

    async def resolve(self, name: str, use: SecretUse | None = None) -> str:
        value = value_of(self._opened, name)
        await self._check(name, use)
        return value

    async def authorize(self, names: Iterable[str], use: SecretUse) -> None:
        for name in names:
            await self._check(name, use)

    async def _check(self, name: str, use: SecretUse | None) -> None:
        refused = refusal(self._opened.scopes.get(name), name, use)
        if use is not None and use.task_id is not None and self._record_use is not None:
            await self._record_use(name, use, refused)
        if refused is not None:
            raise ToolError(refused, error_code=ErrorCode.SECRET_OUT_OF_SCOPE)

    def mask(self, text: str) -> str:
        return self._redactor(text)

    @property
    def values(self) -> Mapping[str, str]:
        return self._opened.values


def value_of(opened: OpenedSecrets, name: str) -> str:
    value = opened.values.get(name)
    if value is not None:
        return value
    why = opened.unreadable.get(name)
    if why is not None:
        raise ToolError(why, error_code=ErrorCode.SECRET_NOT_FOUND)
    raise ToolError(
        f"the secret {name!r} is not set for this tenant (set it with PUT "
        f"/api/v1/tenants/{{tenant_id}}/secrets/{name})",
        error_code=ErrorCode.SECRET_NOT_FOUND,
    )


class SecretVault:
    """Every tenant's secrets. `seal` makes a value ready to store; `resolver(tenant_id)`
    gives one run the tenant's secrets, opened from a cache kept for `ttl_s` that a change
    made through this process (`changed`) drops at once (other instances see it after at most
    `ttl_s`). Every value opened is learnt by `masker`, which log handlers mask with."""

    def __init__(
        self,
        database: Database,
        keys: KeyRing,
        *,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keys = keys
        self.masker = SecretMasker(MASK, min_chars=MIN_MASKED_CHARS)
        self._database = database
        self._cache = TtlCache[str, TenantSecrets](
            ttl_s=ttl_s, max_entries=MAX_CACHED_TENANTS, clock=clock
        )
        # Each tenant's compiled masker, kept while its values stay the same (compiling it
        # is what opening the secrets costs most).
        self._redactors: dict[str, tuple[frozenset[str], Redactor]] = {}

    @classmethod
    def from_settings(cls, database: Database, settings: Settings) -> "SecretVault":
        """The vault of `settings`' keys (`InsecureSettings` in production without one)."""
        return cls(
            database, KeyRing(settings.resolved_secrets_keys()), ttl_s=settings.tenant_cache_s
        )

    def seal(self, tenant_id: str, name: str, value: str) -> Sealed:
        return self.keys.seal(value, tenant_id=tenant_id, name=name)

    def changed(self, tenant_id: str, value: str | None = None) -> None:
        """A secret of the tenant was set (to `value`) or deleted: runs starting from now
        read them again."""
        self._cache.invalidate(tenant_id)
        if value is not None:
            self.masker.learn([value])

    async def learn(self, value: str) -> None:
        """Masks `value` in log lines from now (compiled off the event loop)."""
        await asyncio.to_thread(self.masker.learn, [value])

    async def resolver(self, tenant_id: str) -> SecretResolver:
        return await self._secrets_of(tenant_id)

    async def value(self, tenant_id: str, name: str, use: SecretUse | None = None) -> str:
        """One secret's value (MCP servers' and remote agents' headers), for `use`:
        `ToolError` with `secret_not_found` if the tenant has none of that name,
        `secret_out_of_scope` if its `usable_by` does not allow the use."""
        return await (await self._secrets_of(tenant_id)).resolve(name, use)

    async def unsendable(self, tenant_id: str, headers: Mapping[str, Any]) -> dict[str, str]:
        """Of `headers` (as stored: text, or `{"secret": NAME, "prefix": TEXT}`), those
        whose secret's value an HTTP header cannot carry (after its prefix), each with why
        (naming no character of it). Unknown secrets are not judged here."""
        values = (await self._secrets_of(tenant_id)).values
        problems: dict[str, str] = {}
        for header, given in headers.items():
            if not isinstance(given, Mapping) or given.get("secret") not in values:
                continue
            name = str(given["secret"])
            if not sendable(str(given.get("prefix", "")) + values[name]):
                problems[header] = f"the value of the secret {name!r} {PROBLEM}"
        return problems

    async def redactor(self, tenant_id: str) -> Callable[[str], str]:
        """What masks the tenant's secrets (and every value this process has opened) in a
        text: for what the service writes of a tenant's integrations (their status)."""
        secrets = await self._secrets_of(tenant_id)
        masker = self.masker
        return lambda text: masker(secrets.mask(text))

    async def _secrets_of(self, tenant_id: str) -> TenantSecrets:
        """The tenant's secrets, opened (and their masker compiled) once per cache period."""
        return await self._cache.get_or_load(tenant_id, partial(self._read, tenant_id))

    async def _read(self, tenant_id: str) -> TenantSecrets:
        async with self._database.read() as connection:
            records = await SecretRepository(connection, tenant_id).all()
        # Compiling the maskers is CPU work that grows with the secrets: not on the loop.
        return await asyncio.to_thread(self._prepared, tenant_id, records)

    async def rotate(self, *, batch_size: int = 100) -> Rotation:
        """Seals every secret not sealed under the sealing key again under it, `batch_size`
        secrets per transaction. Safe to run while the service runs (a secret set meanwhile
        is sealed under the sealing key already) and to run again (it resumes)."""
        rotation = Rotation(self.keys.sealing_key_id)
        after_tenant: str | None = None
        while True:
            async with self._database.read() as connection:
                tenants = await TenantRepository(connection).page(
                    after=after_tenant, limit=_TENANT_PAGE
                )
            for tenant in tenants[:_TENANT_PAGE]:
                await self._rotate_tenant(tenant.id, batch_size, rotation)
            if len(tenants) <= _TENANT_PAGE:
                return rotation
            after_tenant = tenants[_TENANT_PAGE - 1].id

    async def _rotate_tenant(self, tenant_id: str, batch_size: int, rotation: Rotation) -> None:
        after: str | None = None
        key_id = self.keys.sealing_key_id
        while True:
            async with self._database.transaction() as connection:
                secrets = SecretRepository(connection, tenant_id)
                batch = await secrets.sealed_under_other_keys(key_id, after=after, limit=batch_size)
                for record in batch:
                    sealed = Sealed(record.key_id, record.sealed)
                    try:
                        value = self.keys.open(sealed, tenant_id=tenant_id, name=record.name)
                    except SecretUnreadable as exc:
                        rotation.unreadable.append(f"{tenant_id}/{record.name}: {exc}")
                        continue
                    again = self.seal(tenant_id, record.name, value)
                    if await secrets.reseal(
                        record.name, was=record.key_id, key_id=again.key_id, sealed=again.text
                    ):
                        rotation.resealed += 1
            if batch:
                rotation.batches += 1
            if len(batch) < batch_size:
                return
            after = batch[-1].name

    def _prepared(self, tenant_id: str, records: Sequence[SecretRecord]) -> TenantSecrets:
        opened = self._open(records)
        self.masker.learn(opened.values.values())
        values = frozenset(opened.values.values())
        known = self._redactors.get(tenant_id)
        if known is None or known[0] != values:
            known = (values, Redactor(values, mask=MASK, min_chars=MIN_MASKED_CHARS))
            if len(self._redactors) >= MAX_CACHED_TENANTS:
                self._redactors.clear()
            self._redactors[tenant_id] = known
        return TenantSecrets(opened, partial(self._record_use, tenant_id), known[1])

    async def _record_use(
        self, tenant_id: str, name: str, use: SecretUse, refused: str | None
    ) -> None:
        """The audit event of a use within a run: by the run's caller (not by any key the
        secret holds), of which secret, through what, for which task and agent."""
        details = {
            "task_id": use.task_id,
            "agent": use.agent,
            "roles": None if use.roles is None else sorted(use.roles),
            "sender": {"kind": use.sender, "name": use.name},
            "outcome": "refused" if refused else "used",
            "reason": refused,
        }
        row = audit_row(
            actor=use.user or "service",
            action=AuditAction.SECRET_USE,
            resource_type="secret",
            resource_id=name,
            details={key: value for key, value in details.items() if value is not None},
            at=utc_now(),
        )
        async with self._database.transaction() as connection:
            await AuditRepository(connection, tenant_id).append([row])

    def _open(self, records: Sequence[SecretRecord]) -> OpenedSecrets:
        values: dict[str, str] = {}
        unreadable: dict[str, str] = {}
        scopes: dict[str, UsableBy] = {}
        for record in records:
            if record.usable_by is not None:
                scopes[record.name] = UsableBy.model_validate(record.usable_by)
            try:
                values[record.name] = self.keys.open(
                    Sealed(record.key_id, record.sealed),
                    tenant_id=record.tenant_id,
                    name=record.name,
                )
            except SecretUnreadable as exc:
                logger.warning("tenant %s: %s", record.tenant_id, exc)
                unreadable[record.name] = str(exc)
        return OpenedSecrets(values, unreadable, scopes)
