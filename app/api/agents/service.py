"""Agent definitions of the caller's tenant. Every change (a new agent, each new version, an
archive) is stored with its audit event in one transaction; a version, once stored, never
changes."""

import asyncio
import re
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.agents import AgentRuntime
from app.api.agents.schemas import AgentCreate, AgentOut, AgentPage, AgentUpdate
from app.api.errors import AGENT_BUILTIN, AGENT_EXISTS, VALIDATION, ApiError, FieldProblem
from app.api.query import decode_int_cursor, decode_key_cursor, encode_key_cursor
from app.api.state import AppState
from app.chain.models import utc_now
from app.governance.audit import AuditAction
from app.governance.auditing import record_change
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.runs.agents import (
    BUILTIN_DEFINITION,
    DEFAULT_AGENT,
    AgentArchived,
    AgentDefinition,
    definition_document,
)
from app.runs.errors import NotFound
from app.runs.models import AGENT_NAME_PATTERN
from app.storage.agents import AgentRepository
from app.storage.pagination import InvalidCursor
from app.storage.records import AgentRecord
from app.tools.builtin.llm import LLM_TOOL_NAME
from app.tools.registry import ToolRegistry
from app.tools.schemas import schema_problem, size_problem
from app.tools.subagents import is_sub_agent_ref
from app.tools.subagents import tool_name as sub_agent_tool_name

# A name cursor sorting before every agent name (names start with a letter): the page after
# a first page that showed only the built-in agent starts at the first stored one.
_FROM_START = "@"

MAX_VERSION = 2**31 - 1
"""Versions are 32-bit on every backend."""


class Applied(StrEnum):
    """What applying a definition did."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


def check_definition(
    runtime: AgentRuntime,
    tenant: Tenant,
    definition: AgentDefinition,
    registry: ToolRegistry | None = None,
    *,
    name: str | None = None,
) -> None:
    """Refuses (422) a definition naming what its tenant's runs could not use: a model that is
    not configured or not approved, a tool that is not registered (in `registry`, the tenant's
    tools; default the process's) or not enabled, a kind this process does not have, or a
    `response_format` or `input_schema` that is not a JSON Schema this service applies (or
    larger than `MAX_SCHEMA_BYTES`); or agent `name` as its own sub-agent (a longer cycle,
    through other agents, is refused when a call would close it). Checking a schema takes up
    to a few hundred milliseconds: call it in a worker thread."""
    registry = registry or runtime.registry
    problems: list[FieldProblem] = []
    if definition.kind not in runtime.kinds:
        known = ", ".join(runtime.kinds.names())
        problems.append(
            FieldProblem(field="body.kind", message=f"unknown kind {definition.kind!r} ({known})")
        )
    model = definition.model
    if model is not None:
        configured = runtime.gateway.model_names()
        if model not in configured:
            message = f"unknown model {model!r}; available: {', '.join(configured)}"
            problems.append(FieldProblem(field="body.model", message=message))
        elif not tenant.models.approves(model):
            message = f"{model!r} is not approved for this tenant"
            problems.append(FieldProblem(field="body.model", message=message))
    enabled = tenant.enabled_tools
    seen: set[str] = set()
    for index, entry in enumerate(definition.tools or []):
        field = f"body.tools.{index}"
        if is_sub_agent_ref(entry):
            tool = sub_agent_tool_name(entry)
            if name is not None and tool == sub_agent_tool_name(f"agent:{name}"):
                message = f"{entry!r} is this agent itself: an agent may not call itself"
                problems.append(FieldProblem(field=field, message=message))
            elif tool in seen:
                problems.append(FieldProblem(field=field, message=f"{entry!r} is listed twice"))
            seen.add(tool)
            continue
        if entry == LLM_TOOL_NAME or entry not in registry:
            problems.append(FieldProblem(field=field, message=f"unknown tool {entry!r}"))
        elif enabled is not None and entry not in enabled:
            message = f"{entry!r} is not enabled for this tenant"
            problems.append(FieldProblem(field=field, message=message))
        elif entry in seen:
            problems.append(FieldProblem(field=field, message=f"{entry!r} is listed twice"))
        seen.add(entry)
    for field, schema in (
        ("body.response_format", definition.response_format),
        ("body.input_schema", definition.input_schema),
    ):
        if schema is not None:
            reason = size_problem(schema) or schema_problem(schema)
            if reason is not None:
                problems.append(FieldProblem(field=field, message=reason))
    if problems:
        raise ApiError(
            VALIDATION, "the definition names what this tenant cannot run", errors=problems
        )


class AgentCatalog:
    """The agents of one caller's tenant, changed within one transaction (`connection`)."""

    def __init__(
        self,
        connection: AsyncConnection,
        runtime: AgentRuntime,
        caller: Caller,
        registry: ToolRegistry | None = None,
    ) -> None:
        self._agents = AgentRepository(connection, caller.tenant_id)
        self._connection = connection
        self._runtime = runtime
        self._caller = caller
        # The tenant's tools (its MCP servers' besides the process's).
        self._registry = registry

    async def create(self, body: AgentCreate) -> AgentRecord:
        if body.name == DEFAULT_AGENT:
            raise ApiError(
                AGENT_EXISTS,
                f"{DEFAULT_AGENT!r} is the built-in agent's name; choose another",
                extra={"agent": body.name},
            )
        definition = body.definition()
        await self._checked(definition, body.name)
        document = definition_document(definition)
        record = await self._agents.create(
            body.name, document, by=self._caller.subject, at=utc_now()
        )
        await self._audit(
            AuditAction.AGENT_CREATE, record.name, None, {"version": 1, "definition": document}
        )
        return record

    async def update(self, name: str, changes: AgentUpdate) -> AgentRecord:
        """A new version from the newest one with `changes`; the newest one itself when they
        change nothing."""
        current = await self._current(name)
        try:
            definition = AgentDefinition.model_validate(changes.applied_to(current.definition))
        except ValidationError as exc:
            raise _invalid(exc) from None
        return await self._new_version(current, definition)

    async def apply(self, body: AgentCreate) -> tuple[Applied, AgentRecord]:
        """Makes `body` the agent's definition: creates the agent, or a new version when the
        definition differs from its newest one."""
        if body.name != DEFAULT_AGENT and await self._agents.get(body.name) is None:
            return Applied.CREATED, await self.create(body)
        current = await self._current(body.name)
        record = await self._new_version(current, body.definition())
        changed = record.version != current.version
        return (Applied.UPDATED if changed else Applied.UNCHANGED), record

    async def archive(self, name: str) -> None:
        """New tasks naming it are refused from now on; its versions stay readable, and
        archiving it again changes nothing."""
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
            raise ApiError(
                AGENT_BUILTIN,
                f"{DEFAULT_AGENT!r} is the built-in agent: it cannot be changed or archived. "
                "Define an agent of your own instead.",
                extra={"agent": name},
            )
        current = await self._agents.get(name, for_update=True)
        if current is None:
            raise NotFound("agent", name)
        if current.archived and not archived_ok:
            raise AgentArchived(name)
        return current

    async def _new_version(self, current: AgentRecord, definition: AgentDefinition) -> AgentRecord:
        if definition == AgentDefinition.model_validate(current.definition):
            return current
        await self._checked(definition, current.name)
        document = definition_document(definition)
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

    async def _checked(self, definition: AgentDefinition, name: str) -> None:
        """`check_definition` in a worker thread: its schemas take a while to check."""
        await asyncio.to_thread(
            check_definition,
            self._runtime,
            self._caller.tenant,
            definition,
            self._registry,
            name=name,
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


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _only(document: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The fields `names` of a definition document; one it leaves unset (default) is null."""
    return {name: document.get(name) for name in names}


def _invalid(exc: ValidationError) -> ApiError:
    errors = [
        FieldProblem(
            field=".".join(["body", *(str(part) for part in error["loc"])]),
            message=error["msg"],
        )
        for error in exc.errors()
    ]
    return ApiError(VALIDATION, "the definition is not valid; see `errors`", errors=errors)


async def create_agent(state: AppState, caller: Caller, body: AgentCreate) -> AgentOut:
    registry = (await state.toolbox.for_tenant(caller.tenant)).registry
    async with state.database.transaction() as connection:
        record = await AgentCatalog(connection, state.runtime, caller, registry).create(body)
    return AgentOut.of(record)


async def update_agent(state: AppState, caller: Caller, name: str, body: AgentUpdate) -> AgentOut:
    registry = (await state.toolbox.for_tenant(caller.tenant)).registry
    async with state.database.transaction() as connection:
        record = await AgentCatalog(connection, state.runtime, caller, registry).update(name, body)
    return AgentOut.of(record)


async def archive_agent(state: AppState, caller: Caller, name: str) -> None:
    async with state.database.transaction() as connection:
        await AgentCatalog(connection, state.runtime, caller).archive(name)


def builtin_agent(caller: Caller) -> AgentOut:
    return AgentOut.builtin_of(
        BUILTIN_DEFINITION, name=DEFAULT_AGENT, since=caller.tenant.record.created_at
    )


async def read_agent(
    state: AppState, caller: Caller, name: str, version: int | None = None
) -> AgentOut:
    """The agent's `version` (its newest by default), archived or not."""
    if name == DEFAULT_AGENT and version in (None, 1):
        return builtin_agent(caller)
    record = None
    if name != DEFAULT_AGENT:
        async with state.database.read() as connection:
            record = await AgentRepository(connection, caller.tenant_id).get(name, version)
    if record is None:
        raise NotFound("agent", name if version is None else f"{name}@{version}")
    return AgentOut.of(record)


async def list_agents(
    state: AppState, caller: Caller, *, cursor: str | None, limit: int, archived: bool
) -> AgentPage:
    """By name, the built-in agent first on the first page."""
    first = not cursor
    after = None if first else _name_after(cursor or "")
    wanted = limit - 1 if first else limit
    async with state.database.read() as connection:
        records = await AgentRepository(connection, caller.tenant_id).page(
            after=after, limit=wanted, archived=archived
        )
    items = ([builtin_agent(caller)] if first else []) + [
        AgentOut.of(record) for record in records[:wanted]
    ]
    if len(records) <= wanted:
        return AgentPage(items=items, next_cursor=None)
    last = records[wanted - 1].name if wanted else _FROM_START
    return AgentPage(items=items, next_cursor=encode_key_cursor(last))


async def list_versions(
    state: AppState, caller: Caller, name: str, *, cursor: str | None, limit: int
) -> AgentPage:
    """Newest first."""
    after = decode_int_cursor(cursor) if cursor else None
    if after is not None and after > MAX_VERSION:
        raise InvalidCursor("the cursor is not one this service issued")
    if name == DEFAULT_AGENT:
        return AgentPage(
            items=[] if after is not None else [builtin_agent(caller)], next_cursor=None
        )
    async with state.database.read() as connection:
        agents = AgentRepository(connection, caller.tenant_id)
        if await agents.get(name) is None:
            raise NotFound("agent", name)
        records = await agents.versions(name, after=after, limit=limit)
    items = [AgentOut.of(record) for record in records[:limit]]
    more = len(records) > limit
    return AgentPage(
        items=items, next_cursor=encode_key_cursor(items[-1].version) if more else None
    )


def _name_after(cursor: str) -> str | None:
    name = decode_key_cursor(cursor)
    if name == _FROM_START:
        return None
    if re.fullmatch(AGENT_NAME_PATTERN, name) is None:
        raise InvalidCursor("the cursor is not one this service issued")
    return name
