"""The agent definitions of a caller's tenant. Every change (a new agent, each new version, an
archive) is stored with its audit event in one transaction; a version, once stored, never
changes. What makes a document a definition its tenant can run is the runs' to say
(`DefinitionRules`): their definitions extend the runtime's spec."""

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain.models import utc_now
from app.errors import NotFound, OmniForgeError
from app.governance.audit import AuditAction
from app.governance.auditing import record_change
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.resources.agents.store import (
    DEFAULT_AGENT,
    AgentArchived,
    AgentBuiltin,
    AgentExists,
    AgentRepository,
)
from app.resources.toolbox import Toolbox
from app.storage.database import Database
from app.storage.pagination import MAX_PAGE_SIZE, InvalidCursor
from app.storage.records import AgentRecord
from app.tools.errors import FieldError
from app.tools.registry import ToolRegistry

MAX_VERSION = 2**31 - 1
"""Versions are 32-bit on every backend."""

FROM_START = "@"
"""Where the page after a first page that showed only the built-in agent starts: a name
sorting before every agent name (names start with a letter)."""

K = TypeVar("K", str, int)


class InvalidDefinition(OmniForgeError):
    """A definition the service does not store: not a definition at all, or one naming what
    its tenant's runs could not use; `problems` name each by its field ("": the whole)."""

    def __init__(self, message: str, problems: list[FieldError]) -> None:
        super().__init__(message)
        self.problems = problems


class DefinitionRules(Protocol):
    """What makes a document an agent definition its tenant can run."""

    def document(self, given: dict[str, Any]) -> dict[str, Any]:
        """`given` as a version stores it: only what is set, in JSON types
        (`InvalidDefinition` when it is not a definition)."""

    def check(
        self,
        tenant: Tenant,
        document: dict[str, Any],
        registry: ToolRegistry | None,
        *,
        name: str,
    ) -> None:
        """Refuses (`InvalidDefinition`) agent `name`'s definition when it names what the
        tenant's runs could not use, with the tools of `registry` (None: the process's).
        Takes up to a few hundred milliseconds."""


class Applied(StrEnum):
    """What applying a definition did."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class BuiltinVersion:
    """The built-in agent's one version, which a tenant has had since it was created."""

    since: datetime


AgentVersion = AgentRecord | BuiltinVersion


@dataclass(frozen=True, slots=True)
class AgentListing(Generic[K]):
    """A page of agent versions; `after` is where the next one starts (None: none follows)."""

    items: list[AgentVersion]
    after: K | None = None


@dataclass(frozen=True, slots=True)
class AgentService:
    """The agents of a caller's tenant. Definitions are read and checked by `definitions`,
    with the tenant's own tools besides the process's (its MCP servers' and remote agents',
    from `toolbox`; None: the process's only)."""

    database: Database
    definitions: DefinitionRules
    toolbox: Toolbox | None = None

    async def create(self, caller: Caller, name: str, given: dict[str, Any]) -> AgentRecord:
        """Version 1 of a new agent. Its name is unique in the tenant, archived agents'
        included, and is not the built-in agent's (`AgentExists`)."""
        registry = await self._registry(caller)
        async with self.database.transaction() as connection:
            return await self._catalog(connection, caller, registry).create(name, given)

    async def update(
        self, caller: Caller, name: str, changes: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> AgentRecord:
        """A new version, its definition what `changes` makes of the newest one's document;
        the newest one itself when that changes nothing. An archived agent cannot change
        (`AgentArchived`), nor can the built-in one (`AgentBuiltin`)."""
        registry = await self._registry(caller)
        async with self.database.transaction() as connection:
            return await self._catalog(connection, caller, registry).update(name, changes)

    async def apply(
        self, caller: Caller, given: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[tuple[Applied, AgentRecord]]:
        """Makes each `(name, definition)` its agent's definition: creates the agent, or a
        new version when the definition differs from its newest one. All of them in one
        transaction, or (on any refusal) none."""
        registry = await self._registry(caller)
        async with self.database.transaction() as connection:
            catalog = self._catalog(connection, caller, registry)
            return [await catalog.apply(name, definition) for name, definition in given]

    async def archive(self, caller: Caller, name: str) -> None:
        """New tasks naming it are refused from now on; its versions stay readable, and
        archiving it again changes nothing."""
        async with self.database.transaction() as connection:
            await self._catalog(connection, caller, None).archive(name)

    async def get(self, caller: Caller, name: str, version: int | None = None) -> AgentVersion:
        """The agent's `version` (its newest by default), archived or not."""
        if name == DEFAULT_AGENT and version in (None, 1):
            return _builtin(caller)
        record = None
        if name != DEFAULT_AGENT:
            async with self.database.read() as connection:
                record = await AgentRepository(connection, caller.tenant_id).get(name, version)
        if record is None:
            raise NotFound("agent", name if version is None else f"{name}@{version}")
        return record

    async def page(
        self, caller: Caller, *, after: str | None, limit: int, archived: bool
    ) -> AgentListing[str]:
        """Newest versions by name, archived agents only with `archived`. The first page
        (`after` None) shows the built-in agent first; `FROM_START` is the page after one that
        showed only it."""
        first = after is None
        wanted = limit - 1 if first else limit
        async with self.database.read() as connection:
            records = await AgentRepository(connection, caller.tenant_id).page(
                after=None if after == FROM_START else after, limit=wanted, archived=archived
            )
        items: list[AgentVersion] = [_builtin(caller)] if first else []
        items += records[:wanted]
        if len(records) <= wanted:
            return AgentListing(items)
        return AgentListing(items, records[wanted - 1].name if wanted else FROM_START)

    async def versions(
        self, caller: Caller, name: str, *, after: int | None, limit: int
    ) -> AgentListing[int]:
        """The agent's versions, newest first, from the one before `after`."""
        if after is not None and after > MAX_VERSION:
            raise InvalidCursor("the cursor is not one this service issued")
        if name == DEFAULT_AGENT:
            return AgentListing([] if after is not None else [_builtin(caller)])
        async with self.database.read() as connection:
            agents = AgentRepository(connection, caller.tenant_id)
            if await agents.get(name) is None:
                raise NotFound("agent", name)
            records = await agents.versions(name, after=after, limit=limit)
        items: list[AgentVersion] = list(records[:limit])
        return AgentListing(items, records[limit - 1].version if len(records) > limit else None)

    async def all(self, caller: Caller, *, archived: bool = False) -> list[AgentRecord]:
        """Every agent of the tenant, by name, at its newest version; archived ones only
        with `archived` (the built-in agent is not stored)."""
        agents: list[AgentRecord] = []
        after: str | None = None
        async with self.database.read() as connection:
            repository = AgentRepository(connection, caller.tenant_id)
            while True:
                page = await repository.page(after=after, limit=MAX_PAGE_SIZE, archived=archived)
                agents += page[:MAX_PAGE_SIZE]
                if len(page) <= MAX_PAGE_SIZE:
                    return agents
                after = page[MAX_PAGE_SIZE - 1].name

    async def _registry(self, caller: Caller) -> ToolRegistry | None:
        if self.toolbox is None:
            return None
        return (await self.toolbox.for_tenant(caller.tenant)).registry

    def _catalog(
        self, connection: AsyncConnection, caller: Caller, registry: ToolRegistry | None
    ) -> "_Catalog":
        return _Catalog(connection, self.definitions, caller, registry)


class _Catalog:
    """The agents of one caller's tenant, changed within one transaction (`connection`)."""

    def __init__(
        self,
        connection: AsyncConnection,
        definitions: DefinitionRules,
        caller: Caller,
        registry: ToolRegistry | None,
    ) -> None:
        self._agents = AgentRepository(connection, caller.tenant_id)
        self._connection = connection
        self._definitions = definitions
        self._caller = caller
        self._registry = registry

    async def create(self, name: str, given: dict[str, Any]) -> AgentRecord:
        if name == DEFAULT_AGENT:
            raise AgentExists(
                name, f"{DEFAULT_AGENT!r} is the built-in agent's name; choose another"
            )
        document = self._definitions.document(given)
        await self._checked(document, name)
        record = await self._agents.create(name, document, by=self._caller.subject, at=utc_now())
        await self._audit(
            AuditAction.AGENT_CREATE, record.name, None, {"version": 1, "definition": document}
        )
        return record

    async def update(
        self, name: str, changes: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> AgentRecord:
        current = await self._current(name)
        document = self._definitions.document(changes(current.definition))
        return await self._new_version(current, document)

    async def apply(self, name: str, given: dict[str, Any]) -> tuple[Applied, AgentRecord]:
        if name != DEFAULT_AGENT and await self._agents.get(name) is None:
            return Applied.CREATED, await self.create(name, given)
        current = await self._current(name)
        record = await self._new_version(current, self._definitions.document(given))
        changed = record.version != current.version
        return (Applied.UPDATED if changed else Applied.UNCHANGED), record

    async def archive(self, name: str) -> None:
        current = await self._current(name, archived_ok=True)
        if current.archived:
            return
        record = await self._agents.archive(current, at=utc_now())
        await self._audit(
            AuditAction.AGENT_ARCHIVE,
            name,
            {"status": current.status},
            {"status": record.status, "archived_at": _iso(record.archived_at)},
        )

    async def _current(self, name: str, *, archived_ok: bool = False) -> AgentRecord:
        if name == DEFAULT_AGENT:
            raise AgentBuiltin(name)
        current = await self._agents.get(name, for_update=True)
        if current is None:
            raise NotFound("agent", name)
        if current.archived and not archived_ok:
            raise AgentArchived(name)
        return current

    async def _new_version(self, current: AgentRecord, document: dict[str, Any]) -> AgentRecord:
        if document == self._definitions.document(current.definition):
            return current
        await self._checked(document, current.name)
        record = await self._agents.add_version(
            current, document, by=self._caller.subject, at=utc_now()
        )
        changed = sorted(
            name
            for name in {*current.definition, *document}
            if current.definition.get(name) != document.get(name)
        )
        await self._audit(
            AuditAction.AGENT_UPDATE,
            current.name,
            {"version": current.version, "definition": _only(current.definition, changed)},
            {"version": record.version, "definition": _only(document, changed)},
        )
        return record

    async def _checked(self, document: dict[str, Any], name: str) -> None:
        """The rules' check in a worker thread: its schemas take a while to check."""
        await asyncio.to_thread(
            self._definitions.check, self._caller.tenant, document, self._registry, name=name
        )

    async def _audit(self, action: AuditAction, name: str, before: Any, after: Any) -> None:
        await record_change(
            self._connection,
            self._caller,
            self._caller.tenant_id,
            action=action,
            before=before,
            after=after,
            resource_type="agent",
            resource_id=name,
        )


def _builtin(caller: Caller) -> BuiltinVersion:
    return BuiltinVersion(since=caller.tenant.record.created_at)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _only(document: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The fields `names` of a definition document; one it leaves unset (default) is null."""
    return {name: document.get(name) for name in names}
