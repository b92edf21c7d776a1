"""A tenant's remote A2A agents: a card is fetched first (outside any transaction: a remote
agent never holds one), then the change is stored with its audit row in one transaction."""

from typing import Any
from uuid import UUID

from a2a.types import AgentCard

from app.api.errors import REMOTE_AGENT_EXISTS, UNAVAILABLE, VALIDATION, ApiError, FieldProblem
from app.api.outbound import check_header_secrets, header_document
from app.api.remote_agents.schemas import (
    RemoteAgentCreate,
    RemoteAgentList,
    RemoteAgentOut,
    RemoteAgentUpdate,
)
from app.api.state import AppState
from app.chain import ErrorCode
from app.chain.models import utc_now
from app.governance.audit import AuditAction
from app.governance.auditing import ResourceAudit
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.resources.remote_agents import RemoteAgents
from app.runs.errors import NotFound
from app.storage.remote_agents import RemoteAgentExists, RemoteAgentRecord, RemoteAgentRepository
from app.tools.a2a.cards import card_document, card_location
from app.tools.errors import ToolError

_CONFIG = ("name", "card_url", "headers", "enabled", "skills")


def agents_of(state: AppState) -> RemoteAgents:
    agents = state.toolbox.remote_agents
    if agents is None:
        raise ApiError(UNAVAILABLE, "this process offers no remote agents")
    return agents


async def list_agents(state: AppState, tenant: Tenant) -> RemoteAgentList:
    async with state.database.read() as connection:
        records = await RemoteAgentRepository(connection, tenant.id).all()
    return RemoteAgentList(items=[RemoteAgentOut.of(record) for record in records])


async def read_agent(state: AppState, tenant: Tenant, agent_id: UUID) -> RemoteAgentOut:
    return RemoteAgentOut.of(await _existing(state, tenant, agent_id))


async def create_agent(
    state: AppState, caller: Caller, tenant: Tenant, body: RemoteAgentCreate
) -> RemoteAgentOut:
    """Fetches the agent's card (422 naming `card_url`, or `headers` for an unknown secret,
    when it cannot be used) and stores the agent with it."""
    agents = agents_of(state)
    headers = header_document(body.headers)
    card_url = card_location(body.card_url)
    await check_header_secrets(state.toolbox.secrets, tenant.id, headers)
    card = await _fetched(agents, tenant, body.name, card_url, headers)
    now = utc_now()
    async with state.database.transaction() as connection:
        try:
            record = await RemoteAgentRepository(connection, tenant.id).create(
                name=body.name,
                card_url=card_url,
                headers=headers,
                card=card_document(card),
                enabled=body.enabled,
                by=caller.subject,
                at=now,
            )
        except RemoteAgentExists as exc:
            raise _exists(exc) from None
        await _audit(connection, caller, tenant, AuditAction.REMOTE_AGENT_CREATE, None, record)
    agents.changed(tenant.id)
    return RemoteAgentOut.of(record)


async def update_agent(
    state: AppState, caller: Caller, tenant: Tenant, agent_id: UUID, body: RemoteAgentUpdate
) -> RemoteAgentOut:
    """Changes the fields given; with `refresh` (or new headers) its card is fetched again
    first, and nothing changes when that fails."""
    agents = agents_of(state)
    changes = body.changes()
    if body.refetches:
        current = await _existing(state, tenant, agent_id)
        headers = changes.get("headers", current.headers)
        await check_header_secrets(state.toolbox.secrets, tenant.id, headers)
        name = changes.get("name", current.name)
        card = await _fetched(agents, tenant, name, current.card_url, headers)
        changes |= {"card": card_document(card), "fetched_at": utc_now()}
    async with state.database.transaction() as connection:
        repository = RemoteAgentRepository(connection, tenant.id)
        before = await repository.get(agent_id)
        if before is None:
            raise _not_found(agent_id)
        changes = {name: value for name, value in changes.items() if getattr(before, name) != value}
        if not changes:
            return RemoteAgentOut.of(before)
        try:
            record = await repository.update(agent_id, changes, at=utc_now())
        except RemoteAgentExists as exc:
            raise _exists(exc) from None
        assert record is not None
        fields = {"skills" if name == "card" else name for name in changes} - {"fetched_at"}
        if fields:  # a refresh that found the same card only moves `fetched_at`
            await _audit(
                connection, caller, tenant, AuditAction.REMOTE_AGENT_UPDATE, before, record, fields
            )
    agents.changed(tenant.id)
    return RemoteAgentOut.of(record)


async def delete_agent(state: AppState, caller: Caller, tenant: Tenant, agent_id: UUID) -> None:
    agents = agents_of(state)
    async with state.database.transaction() as connection:
        repository = RemoteAgentRepository(connection, tenant.id)
        before = await repository.get(agent_id)
        if before is None or not await repository.delete(agent_id):
            raise _not_found(agent_id)
        await _audit(connection, caller, tenant, AuditAction.REMOTE_AGENT_DELETE, before, None)
    agents.changed(tenant.id)


_HEADER_ERRORS = frozenset(
    {ErrorCode.SECRET_NOT_FOUND, ErrorCode.SECRET_OUT_OF_SCOPE, ErrorCode.INVALID_ARGUMENTS}
)


async def _existing(state: AppState, tenant: Tenant, agent_id: UUID) -> RemoteAgentRecord:
    async with state.database.read() as connection:
        record = await RemoteAgentRepository(connection, tenant.id).get(agent_id)
    if record is None:
        raise _not_found(agent_id)
    return record


async def _fetched(
    agents: RemoteAgents, tenant: Tenant, name: str, card_url: str, headers: dict[str, Any]
) -> AgentCard:
    """The card at `card_url`, fetched as the agent `name` would be called; a card that
    cannot be fetched or used is a 422 naming the field to change (`headers` for a secret
    the tenant has not set, or that the agent may not send)."""
    try:
        return await agents.fetch_card(tenant.id, card_url, headers, agent=name)
    except ToolError as exc:
        field = "body.headers" if exc.error_code in _HEADER_ERRORS else "body.card_url"
        raise ApiError(
            VALIDATION,
            f"the agent card at {card_url} cannot be used: {exc.message}",
            errors=[FieldProblem(field=field, message=exc.message)],
        ) from None


def audited(record: RemoteAgentRecord, fields: set[str] | None = None) -> dict[str, Any]:
    """An agent's configuration as the audit log keeps it: headers' secret references as
    they are, their text values as `[text]` (a header may hold a credential), its card's
    skills by id."""
    document: dict[str, Any] = {
        "name": record.name,
        "card_url": record.card_url,
        "headers": {
            name: value if isinstance(value, dict) else "[text]"
            for name, value in record.headers.items()
        },
        "enabled": record.enabled,
        "skills": [skill.get("id") for skill in record.card.get("skills", [])],
    }
    return {name: document[name] for name in _CONFIG if fields is None or name in fields}


def _not_found(agent_id: UUID) -> NotFound:
    return NotFound("remote agent", str(agent_id))


def _exists(exc: RemoteAgentExists) -> ApiError:
    return ApiError(REMOTE_AGENT_EXISTS, f"{exc}; choose another name")


_audit = ResourceAudit("remote_agent", audited)
