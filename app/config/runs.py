"""How runs are taken, held and resumed across the service's instances, and how long what
they leave is kept."""

from pydantic import Field

from app.config.values import Section

# The longest retention a tenant or the platform may set: ten years.
MAX_RETENTION_DAYS = 3650


class RunSettings(Section):
    """Leases, drains and outages; how many runs at once; resumes, sub-agents, approvals,
    idempotency keys and schedules; retention and its purge."""

    runner_heartbeat_s: float = Field(
        default=10.0,
        gt=0,
        description="How often a server renews its lease on its runs; one silent for three "
        "intervals is presumed dead and its runs are resumed by another server.",
    )
    shutdown_grace_s: float = Field(
        default=5.0,
        ge=0,
        description="On shutdown (SIGTERM), the whole drain: runs start no new call, the calls "
        "under way finish and are stored, runs are handed to another server and streams end "
        "for their clients to reconnect there — all within this. A call still under way "
        "past it is cut (counted in `omniforge_calls_cut_total`) and made again where its run "
        "resumes.",
    )
    store_outage_s: float = Field(
        default=300.0,
        gt=0,
        description="How long runs wait out a store (database) outage: they start no new call "
        "meanwhile and keep the results of calls under way until they can be stored. Past "
        "it, a run is let go to be resumed from what is stored (never failed).",
    )
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="A second port `omniforge serve` listens on (same host) for `/metrics` "
        "alone: the API's port then answers `/metrics` with 404, so a scraper reaches it on a "
        "port that is never published (none: `/metrics` on the API's port, no token).",
    )
    max_concurrent_runs: int = Field(
        default=1000,
        ge=1,
        le=1_000_000,
        description="Runs this server takes from the queue at most at once; the rest wait "
        "for room here or on another server.",
    )
    max_concurrent_submissions: int = Field(
        default=16,
        ge=1,
        le=10_000,
        description="Submissions this server stores and starts at most at once; more wait "
        "their turn in arrival order, so a burst's last task does not wait for the work of "
        "every run the burst started before it.",
    )
    resume: bool = Field(
        default=True,
        description="Resume a run whose server stopped from its stored steps (false: such "
        "runs end `interrupted`).",
    )
    max_resumes: int = Field(
        default=3,
        ge=0,
        le=100,
        description="A run whose server stopped this many times while running it ends "
        "`interrupted` instead of being resumed again.",
    )
    max_agent_depth: int = Field(
        default=3,
        ge=0,
        le=10,
        description="How deep sub-agents may nest: a task is at depth 0, the task of a "
        "sub-agent it calls at 1, and so on; a call that would go deeper fails "
        "`agent_depth_exceeded` (0: no sub-agents).",
    )
    approval_timeout_s: float = Field(
        default=86_400.0,
        gt=0,
        le=30 * 86_400,
        description="How long a tool call waits for a human's approval before it is denied "
        "on its own, unless its agent's or tenant's rules set `timeout_s`.",
    )
    idempotency_key_ttl_s: float = Field(
        default=86_400.0,
        ge=60,
        le=30 * 86_400,
        description="How long a task submission's `Idempotency-Key` answers with the task it "
        "made; after that the key may be used again.",
    )
    scheduler: bool = Field(
        default=True,
        description="Fire the tenants' schedules from this process. Every instance may: each "
        "firing is claimed by exactly one of them.",
    )
    retention_days: int = Field(
        default=90,
        ge=1,
        le=MAX_RETENTION_DAYS,
        description="How long a finished task (its chain, steps, events and costs), a "
        "conversation after its last activity, and an uploaded file are kept, for tenants "
        "that set no `retention_days` of their own. The daily usage roll-up is kept anyway.",
    )
    audit_retention_days: int = Field(
        default=400,
        ge=1,
        le=MAX_RETENTION_DAYS,
        description="How long audit events are kept, for tenants that set no "
        "`audit_retention_days` of their own.",
    )
    purge_interval_s: float = Field(
        default=86_400.0,
        ge=0,
        description="How often this process runs the retention purge (one instance at a time "
        "across the cluster; the first run comes within an hour of start-up); 0: never.",
    )
    purge_batch_size: int = Field(
        default=200,
        ge=1,
        le=10_000,
        description="Tasks, conversations, files or audit events the purge deletes per "
        "transaction: short transactions that never hold up the runs' writes for long.",
    )
