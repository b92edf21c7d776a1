"""What the lifespan builds and routes reach through dependencies."""

from dataclasses import dataclass

from app.agents import AgentRuntime
from app.config import Settings
from app.governance.api_keys import ApiKeys
from app.governance.erasure import Erasure
from app.governance.retention import Purge
from app.governance.tenants import TenantDirectory
from app.resources.toolbox import Toolbox
from app.resources.webhooks import Webhooks
from app.runs import RunManager
from app.runs.tasks import ScheduleFirings, TaskService
from app.security import TokenVerifier
from app.security.stream_tickets import StreamTickets
from app.storage import Database
from app.storage.runs import RunStores


@dataclass(frozen=True, slots=True)
class AppState:
    settings: Settings
    database: Database
    runtime: AgentRuntime
    runs: RunManager
    run_stores: RunStores
    # What callers do with tasks, whichever way they come in; schedules' tasks.
    tasks: TaskService
    schedule_firings: ScheduleFirings
    verifier: TokenVerifier
    tenants: TenantDirectory
    # Tenants' own tools (MCP servers) and the services tools reach (secrets, files, todos).
    toolbox: Toolbox
    # Credentials that open one task's stream (a browser's EventSource).
    stream_tickets: StreamTickets
    api_keys: ApiKeys
    # Tenants' webhook endpoints, their subscriptions and the outbox's dispatcher (None only
    # in states built without them).
    webhooks: Webhooks | None = None
    # The retention purge (its timer runs from the lifespan; tests call `run()`), and erasures
    # of tasks and conversations (None only in states built without them).
    purge: Purge | None = None
    erasure: Erasure | None = None
