"""The services routes use, each built from the application's state when a route asks for
it: every route's collaborators are wired here, in one place."""

from datetime import timedelta
from typing import Annotated

from fastapi import Depends

from app.api.deps import State
from app.governance.costs import CostReports
from app.governance.retention import RetentionDefaults
from app.resources.agents import AgentService
from app.resources.api_keys import ApiKeyService
from app.resources.conversations import ConversationService
from app.resources.files import FileLibrary
from app.resources.mcp_servers import McpServerService
from app.resources.remote_agents import RemoteAgentService
from app.resources.schedules import ScheduleService
from app.resources.secrets import SecretService
from app.resources.tenants import TenantService
from app.resources.webhooks.service import WebhookService
from app.runs.agents import RunnableDefinitions, resolve_agent
from app.runs.approval_inbox import ApprovalInbox
from app.runs.chains import ChainService
from app.runs.erasure import ErasureService


def agent_service(state: State) -> AgentService:
    return AgentService(state.database, RunnableDefinitions(state.runtime), state.toolbox)


Agents = Annotated[AgentService, Depends(agent_service)]


def _api_keys(state: State) -> ApiKeyService:
    return ApiKeyService(state.database, state.api_keys)


TenantApiKeys = Annotated[ApiKeyService, Depends(_api_keys)]


def _inbox(state: State) -> ApprovalInbox:
    return ApprovalInbox(
        state.database, state.runs, state.run_stores.approvals, state.runtime.executor.threads
    )


Inbox = Annotated[ApprovalInbox, Depends(_inbox)]


def _chains(state: State) -> ChainService:
    return ChainService(state.database, state.runs)


Chains = Annotated[ChainService, Depends(_chains)]


def conversation_service(state: State) -> ConversationService:
    return ConversationService(state.database, resolve_agent)


Conversations = Annotated[ConversationService, Depends(conversation_service)]


def _reports(state: State) -> CostReports:
    return CostReports(state.database)


Reports = Annotated[CostReports, Depends(_reports)]


def _erasure(state: State) -> ErasureService:
    assert state.erasure is not None, "the lifespan builds the erasure"
    return ErasureService(state.database, state.erasure, state.runs)


Erasures = Annotated[ErasureService, Depends(_erasure)]


async def _library(state: State) -> FileLibrary:
    """The process's file library (the one its runs' tools use), or one on its settings."""
    return state.toolbox.files or FileLibrary.from_settings(state.database, state.settings)


Files = Annotated[FileLibrary, Depends(_library)]


def _servers(state: State) -> McpServerService:
    toolbox = state.toolbox
    return McpServerService(state.database, toolbox.mcp, toolbox.secrets)


McpServers = Annotated[McpServerService, Depends(_servers)]


def _remote_agents(state: State) -> RemoteAgentService:
    toolbox = state.toolbox
    return RemoteAgentService(state.database, toolbox.remote_agents, toolbox.secrets)


RemoteAgentsOf = Annotated[RemoteAgentService, Depends(_remote_agents)]


async def _schedules(state: State) -> ScheduleService:
    return ScheduleService(
        state.database,
        state.run_stores.notices,
        state.tenants,
        state.api_keys,
        state.schedule_firings.check,
    )


Schedules = Annotated[ScheduleService, Depends(_schedules)]


def _secrets(state: State) -> SecretService:
    toolbox = state.toolbox
    return SecretService(state.database, toolbox.secrets, toolbox.mcp)


Secrets = Annotated[SecretService, Depends(_secrets)]


def _tenants(state: State) -> TenantService:
    settings = state.settings
    return TenantService(
        state.database,
        state.tenants,
        state.toolbox,
        state.runtime.gateway.model_names(),
        RetentionDefaults(settings.retention_days, settings.audit_retention_days),
    )


Tenants = Annotated[TenantService, Depends(_tenants)]


def _webhooks(state: State) -> WebhookService:
    retry_for = timedelta(seconds=state.settings.webhook_retry_for_s)
    return WebhookService(state.database, state.webhooks, state.toolbox.network_of, retry_for)


TenantWebhooks = Annotated[WebhookService, Depends(_webhooks)]
