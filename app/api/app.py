"""The app factory and its lifespan: every resource is built at start-up, none at import."""

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from fastapi import FastAPI
from opentelemetry.sdk.trace.export import SpanExporter

from app.agents import AgentRuntime, RuntimeSettings
from app.api import health, metrics
from app.api.a2a.router import router as a2a_router
from app.api.agents.router import router as agents_router
from app.api.api_keys.router import router as api_keys_router
from app.api.approvals.router import router as approvals_router
from app.api.auth import BearerAuthentication
from app.api.chains.router import router as chains_router
from app.api.client_errors import ClientErrorLimit
from app.api.console import router as console_router
from app.api.conversations.router import router as conversations_router
from app.api.cors import ListedOrigins
from app.api.costs.router import router as costs_router
from app.api.docs import install_docs
from app.api.erasure.router import router as erasure_router
from app.api.errors import install_error_handlers
from app.api.files.router import router as files_router
from app.api.inputs import BodyLimit
from app.api.mcp_servers.router import router as mcp_servers_router
from app.api.me import router as me_router
from app.api.models.router import router as models_router
from app.api.openai_compat.errors import OpenAIErrorBodies
from app.api.openai_compat.router import router as openai_router
from app.api.openapi import install_openapi
from app.api.remote_agents.router import router as remote_agents_router
from app.api.request_ids import RequestIds
from app.api.root import router as root_router
from app.api.routes import add_routes
from app.api.schedules.router import router as schedules_router
from app.api.secrets.router import router as secrets_router
from app.api.serving import listeners_of
from app.api.state import AppState
from app.api.tasks.router import router as tasks_router
from app.api.tasks.tickets import router as stream_tickets_router
from app.api.tenants.router import router as tenants_router
from app.api.tools.router import router as tools_router
from app.api.unavailable import StoreOutages
from app.api.webhooks.router import router as webhooks_router
from app.config import Settings
from app.governance.api_keys import ApiKeys
from app.governance.deletions import DeletedRows
from app.governance.erasure import Erasure
from app.governance.limits import make_limit_store
from app.governance.retention import Purge, RetentionDefaults
from app.governance.tenants import TenantDirectory, ensure_default_tenant
from app.governance.window_history import WindowHistory
from app.observability.tracing import RunTracer, service_version
from app.resources.files import FileLibrary
from app.resources.mcp_servers import McpServers
from app.resources.remote_agents import RemoteAgents
from app.resources.sandboxes import build_workspaces
from app.resources.schedules import Scheduler, ScheduleStore
from app.resources.secrets import SecretVault
from app.resources.todos import TodoLists
from app.resources.toolbox import Toolbox, process_tools
from app.resources.webhooks import Webhooks
from app.runs import RunManager
from app.runs.live import LiveRuns
from app.runs.tasks import RunInputs, ScheduleFirings, TaskService
from app.security import TokenVerifier
from app.security.log_masking import install_log_masking
from app.security.stream_tickets import StreamTickets, install_ticket_masking
from app.storage import Database, current_revision, head_revision
from app.storage.notify import SCHEDULES, notices_for
from app.storage.runs import RunStores
from app.tools import documents
from app.tools.a2a.client import A2AConnector
from app.tools.a2a.remote import CALL_TIMEOUT_S
from app.tools.base import BaseTool
from app.tools.net.policy import ServiceListeners
from app.tools.services import NetworkPolicy

logger = logging.getLogger(__name__)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    verifier = TokenVerifier.from_settings(settings)
    database = Database(settings.resolved_database_url(), pool_size=settings.database_pool_size)
    tenants = TenantDirectory(database, ttl_s=settings.tenant_cache_s)
    limits = make_limit_store(settings.redis_url, history=WindowHistory(database))
    # None unless OTEL_EXPORTER_OTLP_ENDPOINT is set: runs then record no spans at all.
    tracer = RunTracer.from_settings(settings, exporter=app.state.span_exporter)
    # Documents (uploads, fetched PDFs) are read in processes of their own, within limits.
    reader = documents.DocumentReader(
        documents.DocumentLimits(
            cpu_s=settings.document_cpu_s,
            timeout_s=settings.document_timeout_s,
            memory_bytes=settings.document_memory_mb * 2**20,
            max_pages=settings.document_max_pages,
            workers=settings.document_workers,
            tenant_slots=settings.tenant_work_slots,
        )
    )
    # Not warmed here: every process would pay for two readers it may never use (and the test
    # suite starts hundreds); the first document starts them, and they are kept.
    stop_documents = documents.install(reader)
    try:
        run_stores = RunStores.of(database, notices_for(database))
        # A plugin that cannot be loaded stops the start here, named.
        tools = process_tools(settings, app.state.extra_tools)
        # The runs live here: the runtime hands them the cost records of their calls.
        live = LiveRuns()
        runtime = AgentRuntime.build(
            RuntimeSettings.model_validate(settings), tools=tools, recorder=live
        )
        # What start-up built lives as long as the process: keep it out of the collector's
        # full passes (they took 0.4 s under load otherwise).
        gc.collect()
        gc.freeze()
        revision = await current_revision(database)
        current = revision == head_revision()
        if not current:
            logger.error(
                "database schema at %s, not %s: run `omniforge migrate`", revision, head_revision()
            )
        network = NetworkPolicy.of(settings.network_allow, service=listeners_of(app))
        vault = SecretVault.from_settings(database, settings)
        stop_masking = install_log_masking(vault.masker)
        stop_ticket_masking = install_ticket_masking()
        mcp = McpServers(database, secrets=vault, network=network, timeout_s=settings.mcp_timeout_s)
        library = FileLibrary.from_settings(database, settings)
        # The sandbox tools join the process's tools here, when this host can run them.
        workspaces = build_workspaces(settings, runtime.registry, database)
        toolbox = Toolbox(
            runtime.registry,
            network=network,
            secrets=vault,
            files=library,
            workspaces=workspaces,
            todos=TodoLists(database),
            mcp=mcp,
            remote_agents=RemoteAgents(
                database,
                secrets=vault,
                network=network,
                connector=A2AConnector(
                    timeout_s=settings.fetch_timeout_s, call_timeout_s=CALL_TIMEOUT_S
                ),
            ),
        )
        webhooks = Webhooks.build(
            database,
            run_stores.notices,
            settings,
            keys=vault.keys,
            masker=vault.masker,
            network=network,
        )
        api_keys = ApiKeys(database, ttl_s=settings.api_key_cache_s)
        inputs = RunInputs(database, tenants, api_keys, toolbox, webhooks)
        runs = RunManager(
            run_stores,
            runtime,
            live=live,
            # Runs accepted by another instance, or before a restart, are rebuilt from the store.
            loader=inputs.load,
            heartbeat_s=settings.runner_heartbeat_s,
            audit_flush_s=settings.audit_flush_s,
            limits=limits,
            max_runs=settings.max_concurrent_runs,
            max_submissions=settings.max_concurrent_submissions,
            resume=settings.resume,
            max_resumes=settings.max_resumes,
            approval_timeout_s=settings.approval_timeout_s,
            tracer=tracer,
            max_agent_depth=settings.max_agent_depth,
            store_outage_s=settings.store_outage_s,
        )
        tasks = TaskService(
            database,
            runs,
            run_stores,
            inputs,
            keepalive_s=settings.sse_keepalive_s,
            idempotency_ttl_s=settings.idempotency_key_ttl_s,
        )
        firings = ScheduleFirings(tasks)
        deleted_rows = DeletedRows(runs.metrics.registry)
        purge = Purge(
            database,
            defaults=RetentionDefaults(settings.retention_days, settings.audit_retention_days),
            batch_size=settings.purge_batch_size,
            file_store=None if toolbox.files is None else toolbox.files.store,
            deleted_rows=deleted_rows,
        )
        state = AppState(
            settings=settings,
            database=database,
            runtime=runtime,
            runs=runs,
            run_stores=run_stores,
            tasks=tasks,
            schedule_firings=firings,
            verifier=verifier,
            tenants=tenants,
            toolbox=toolbox,
            stream_tickets=StreamTickets.from_settings(settings),
            api_keys=api_keys,
            webhooks=webhooks,
            purge=purge,
            erasure=Erasure(database, deleted_rows),
        )
        app.state.omniforge = state
        scheduler = Scheduler(ScheduleStore(database), firings.fire)
        run_stores.notices.listen(SCHEDULES, scheduler.changed)
        run_stores.notices.on_reconnect.append(scheduler.changed)
        if current:
            if settings.env == "development":
                await ensure_default_tenant(database)
            await runs.start()
            # After the runs: their notices' connection is up.
            await webhooks.dispatcher.start()
            purge.start(settings.purge_interval_s)
            if settings.scheduler:
                scheduler.start()
        # Ready without LiteLLM (seconds of CPU): it loads in the background once the server
        # listens (a server that says when, `app.state.serving`; at once under another), so
        # that it does not compete with the start-up for the CPU; a run waits for it
        # (`RunManager`); /readyz says so if it cannot be loaded.
        serving: asyncio.Event | None = getattr(app.state, "serving", None)
        loading = asyncio.create_task(_load_runtime(runtime, serving), name="runtime-load")
        try:
            yield
        finally:
            loading.cancel()  # the load itself goes on in its thread; a run may still want it
            await scheduler.stop()
            await purge.stop()
            await runs.stop(settings.shutdown_grace_s)
            if workspaces is not None:
                await workspaces.close()
            await runtime.gateway.aclose()
            # Sends under way are cut: their claims lapse and they are sent again.
            await webhooks.dispatcher.aclose()
            await mcp.aclose()
            stop_masking()
            stop_ticket_masking()
    finally:
        stop_documents()
        await verifier.aclose()
        await limits.aclose()
        if tracer is not None:  # exports the spans still queued (blocking HTTP)
            await asyncio.to_thread(tracer.shutdown)
        await database.dispose()


async def _load_runtime(runtime: AgentRuntime, serving: asyncio.Event | None) -> None:
    """Loads the runtime (once `serving` is set, if given) with the collector paused, and
    freezes what it made: hundreds of thousands of objects that live as long as the process
    and next to no garbage, which the collector's passes would walk again and again (a third
    of the load's CPU), and every later full collection with them."""
    if serving is not None:
        await serving.wait()
    collecting = gc.isenabled()
    gc.disable()
    try:
        await runtime.loaded()
    except Exception:  # logged where it failed; /readyz reports it
        return
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


@asynccontextmanager
async def _serving(app: FastAPI) -> AsyncIterator[None]:
    async with _lifespan(app), metrics.sample_loop_lag(app):
        yield


def create_app(
    settings: Settings | None = None,
    *,
    tools: Sequence[BaseTool] = (),
    span_exporter: SpanExporter | None = None,
) -> FastAPI:
    """The OmniForge service. `uvicorn --factory app.api:create_app` or `omniforge serve`.
    `tools` are registered besides the built-in ones; runs' spans go to `span_exporter` when
    given (else by OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set)."""
    app = FastAPI(
        title="OmniForge",
        # The package's version (pyproject.toml, as installed), as traces report it too.
        version=service_version(),
        summary="Multi-tenant agent service: every agent operation is a tool call, every call "
        "a step of a persisted, streamed reasoning chain.",
        lifespan=_serving,
        # Served by `install_docs` from the service's own assets, not from a CDN.
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings or Settings()
    app.state.extra_tools = list(tools)
    app.state.span_exporter = span_exporter
    # The ports it listens on, as its server binds them: the SSRF guard never lets a tool
    # reach them on this machine's own addresses.
    metrics_port = app.state.settings.metrics_port
    app.state.listeners = ServiceListeners([] if metrics_port is None else [metrics_port])
    install_error_handlers(app)
    install_openapi(app)
    # Inside authentication: it counts the 4xx answers of the caller's tenant.
    app.add_middleware(ClientErrorLimit, per_minute=app.state.settings.client_errors_per_minute)
    app.add_middleware(BearerAuthentication)
    # Outermost: a body over the cap is refused before anything reads it.
    app.add_middleware(BodyLimit, max_bytes=app.state.settings.max_body_bytes)
    # Around all of /v1/ (401s and 413s included): problems carry an OpenAI-style `error`.
    app.add_middleware(OpenAIErrorBodies)
    app.add_middleware(StoreOutages)  # around all that may reach a store
    if app.state.settings.cors_origins:
        # Outside even the body limit: a preflight is answered before anything else.
        app.add_middleware(ListedOrigins, origins=app.state.settings.cors_origins)
    # Outermost of all: every response names its request, and so does every log line.
    app.add_middleware(RequestIds)
    install_docs(app)
    # First: a request is matched against the routes in this order, and a task's submission
    # and stream are most of the requests.
    add_routes(
        app,
        tasks_router,
        root_router,
        console_router,
        me_router,
        health.router,
        metrics.router,
        approvals_router,
        stream_tickets_router,
        agents_router,
        conversations_router,
        chains_router,
        tenants_router,
        tools_router,
        models_router,
        costs_router,
        erasure_router,
        files_router,
        secrets_router,
        mcp_servers_router,
        remote_agents_router,
        schedules_router,
        webhooks_router,
        openai_router,
        api_keys_router,
        a2a_router,
    )
    return app
