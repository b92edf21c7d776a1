"""Agent definitions and their immutable versions, within one tenant; and what a stored agent
can refuse: a name taken, a change to an archived agent or to the built-in one."""

from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import Select, insert, select, update
from sqlalchemy.exc import IntegrityError

from app.errors import OmniForgeError
from app.ids import uuid4
from app.storage.records import AgentRecord
from app.storage.repository import TenantScoped
from app.storage.tables import agent_versions, agents

ACTIVE = "active"
ARCHIVED = "archived"

DEFAULT_AGENT = "default"
"""Every tenant's built-in agent: the ReAct agent with the service's defaults, version 1. No
stored agent may take its name."""


class AgentExists(OmniForgeError):
    """The name is taken: by an agent of the tenant (archived or not), or by the built-in one."""

    def __init__(self, name: str, reason: str | None = None) -> None:
        super().__init__(reason or f"an agent named {name!r} already exists")
        self.name = name


class AgentArchived(OmniForgeError):
    """New tasks cannot run an archived agent (its old tasks keep their version), and it
    cannot change."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"agent {name!r} is archived: it runs no new tasks (its past tasks and versions "
            "stay readable)"
        )
        self.name = name


class AgentBuiltin(OmniForgeError):
    """The built-in agent has one version, which no one changes or archives."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"{name!r} is the built-in agent: it cannot be changed or archived. "
            "Define an agent of your own instead."
        )
        self.name = name


class AgentRepository(TenantScoped):
    def _select(self) -> Select[Any]:
        a, v = agents.c, agent_versions.c
        return (
            select(
                a.id,
                a.tenant_id,
                a.name,
                v.version,
                a.latest_version,
                a.status,
                v.definition,
                a.created_by,
                a.created_at,
                a.updated_at,
                a.archived_at,
                v.created_by.label("version_created_by"),
                v.created_at.label("version_created_at"),
            )
            .join(agent_versions, v.agent_id == a.id)
            .where(a.tenant_id == self.tenant_id)
        )

    async def get(
        self, name: str, version: int | None = None, *, for_update: bool = False
    ) -> AgentRecord | None:
        """The agent's `version` (its newest by default), archived or not; `for_update`
        locks the agent until the transaction ends."""
        a, v = agents.c, agent_versions.c
        if for_update:
            # The agent's row is locked on its own first: locking the join instead, a writer
            # that waited for another one re-checks the join against the version it read
            # before waiting, which is no longer the newest, and finds no agent at all.
            await self.connection.execute(
                select(a.id).where(a.tenant_id == self.tenant_id, a.name == name).with_for_update()
            )
        statement = self._select().where(a.name == name)
        statement = statement.where(v.version == (a.latest_version if version is None else version))
        row = (await self.connection.execute(statement)).first()
        return None if row is None else AgentRecord.model_validate(row._mapping)

    async def page(
        self, *, after: str | None, limit: int, archived: bool = False
    ) -> list[AgentRecord]:
        """Newest versions by name, at most `limit + 1` (the extra one says there is more);
        archived agents only with `archived`."""
        a, v = agents.c, agent_versions.c
        statement = self._select().where(v.version == a.latest_version)
        if not archived:
            statement = statement.where(a.status == ACTIVE)
        if after is not None:
            statement = statement.where(a.name > after)
        statement = statement.order_by(a.name).limit(limit + 1)
        rows = (await self.connection.execute(statement)).all()
        return [AgentRecord.model_validate(row._mapping) for row in rows]

    async def versions(self, name: str, *, after: int | None, limit: int) -> list[AgentRecord]:
        """The agent's versions, newest first, at most `limit + 1`."""
        a, v = agents.c, agent_versions.c
        statement = self._select().where(a.name == name)
        if after is not None:
            statement = statement.where(v.version < after)
        statement = statement.order_by(v.version.desc()).limit(limit + 1)
        rows = (await self.connection.execute(statement)).all()
        return [AgentRecord.model_validate(row._mapping) for row in rows]

    async def create(
        self, name: str, definition: dict[str, Any], *, by: str, at: datetime
    ) -> AgentRecord:
        """A new agent at version 1 (`AgentExists` if the name is taken, archived or not)."""
        agent_id = uuid4()
        try:
            await self.connection.execute(
                insert(agents).values(
                    id=agent_id,
                    tenant_id=self.tenant_id,
                    name=name,
                    latest_version=1,
                    status=ACTIVE,
                    created_by=by,
                    created_at=at,
                    updated_at=at,
                )
            )
        except IntegrityError as exc:
            raise AgentExists(name) from exc
        await self._insert_version(agent_id, 1, definition, by=by, at=at)
        record = await self.get(name)
        assert record is not None
        return record

    async def add_version(
        self, current: AgentRecord, definition: dict[str, Any], *, by: str, at: datetime
    ) -> AgentRecord:
        """Version `current.latest_version + 1` of an agent read `for_update`."""
        version = current.latest_version + 1
        await self._insert_version(current.id, version, definition, by=by, at=at)
        await self.connection.execute(
            update(agents)
            .where(agents.c.id == current.id, agents.c.tenant_id == self.tenant_id)
            .values(latest_version=version, updated_at=at)
        )
        record = await self.get(current.name, version)
        assert record is not None
        return record

    async def archive(self, current: AgentRecord, *, at: datetime) -> AgentRecord:
        await self.connection.execute(
            update(agents)
            .where(agents.c.id == current.id, agents.c.tenant_id == self.tenant_id)
            .values(status=ARCHIVED, archived_at=at, updated_at=at)
        )
        record = await self.get(current.name)
        assert record is not None
        return record

    async def _insert_version(
        self, agent_id: UUID, version: int, definition: dict[str, Any], *, by: str, at: datetime
    ) -> None:
        await self.connection.execute(
            insert(agent_versions).values(
                agent_id=agent_id,
                version=version,
                tenant_id=self.tenant_id,
                definition=definition,
                created_by=by,
                created_at=at,
            )
        )
