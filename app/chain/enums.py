"""Enumerations shared by chains, tools and events."""

from enum import StrEnum


class StepType(StrEnum):
    """What a reasoning step records."""

    THINKING = "thinking"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    SYNTHESIS = "synthesis"


class StrategyEvent(StrEnum):
    """What a strategy's `thinking` step records, besides its text: the structure of how a
    run reasons (the tree of a search, a choice of strategy), as the console and a replay
    read it."""

    # `auto`: the task's complexity score and why (detail: complexity, method).
    COMPLEXITY_ASSESSED = "complexity_assessed"
    # The strategy a run goes on with and why (detail: strategy, complexity, excluded).
    STRATEGY_SELECTED = "strategy_selected"
    # A strategy failed and the run goes on with a simpler one (detail: from, to, error_code).
    STRATEGY_FALLBACK = "strategy_fallback"
    # A node of a search tree: its parent is `parent_step_id` (detail: depth, index).
    THOUGHT = "thought"
    # A node's score, as the model judged it (`confidence`; its node is `parent_step_id`).
    THOUGHT_SCORED = "thought_scored"
    # The path a search answers from (detail: path, the nodes' step ids root first; score).
    PATH_CHOSEN = "path_chosen"
    # `plan`: the plan (detail: steps, the graph; revision), a revision of what is left of it
    # (and why), each step's start, end or failure (detail: step, attempt), its end.
    PLAN_CREATED = "plan_created"
    PLAN_STEP_STARTED = "plan_step_started"
    PLAN_STEP_COMPLETED = "plan_step_completed"
    PLAN_STEP_FAILED = "plan_step_failed"
    PLAN_REVISED = "plan_revised"
    PLAN_COMPLETED = "plan_completed"


class ToolType(StrEnum):
    """The kind of operation a tool performs; limits and visibility can be set per type."""

    LLM = "llm"
    EXTERNAL = "external"
    SKILL = "skill"
    SUB_AGENT = "sub_agent"
    DATABASE = "database"
    FILE_SYSTEM = "file_system"
    CUSTOM = "custom"
    # A tool of a tenant's remote MCP server.
    MCP = "mcp"
    # Code and commands run in a sandboxed workspace (`run_code`, `run_shell`...).
    SANDBOX = "sandbox"


class VisibilityLevel(StrEnum):
    """How much of a step a reader without full access may see."""

    FULL = "full"
    SUMMARY = "summary"
    HIDDEN = "hidden"


class ChainStatus(StrEnum):
    """Lifecycle of a reasoning chain."""

    INITIALIZING = "initializing"
    THINKING = "thinking"
    TOOL_CALLING = "tool_calling"
    WAITING = "waiting"
    COMPLETED = "completed"
    # Stopped by a limit (`stop_reason`) after answering from what it had (`on_limit: answer`).
    INCOMPLETE = "incomplete"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL_CHAIN_STATUSES


_TERMINAL_CHAIN_STATUSES = frozenset(
    {ChainStatus.COMPLETED, ChainStatus.INCOMPLETE, ChainStatus.FAILED, ChainStatus.CANCELLED}
)


class TaskState(StrEnum):
    """State of the task a chain works on, as reported by `task_status` and `done` events."""

    SUBMITTED = "submitted"
    WORKING = "working"
    # Its run waits for a human's decision on tool calls: no instance holds it meanwhile.
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    # A limit stopped it and it answered from what it had: `result` holds that answer and
    # `stop_reason` names the limit.
    INCOMPLETE = "incomplete"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL_TASK_STATES


_TERMINAL_TASK_STATES = frozenset(
    {TaskState.COMPLETED, TaskState.INCOMPLETE, TaskState.FAILED, TaskState.CANCELLED}
)


class ErrorCode(StrEnum):
    """Why a chain or a tool call failed. The set is fixed and documented in the docs' error
    reference (docs/reference/errors.md, "Chain error codes")."""

    BUDGET_EXCEEDED = "budget_exceeded"
    RATE_LIMITED = "rate_limited"
    MODEL_NOT_APPROVED = "model_not_approved"
    PERMISSION_DENIED = "permission_denied"
    MAX_ITERATIONS = "max_iterations"
    LLM_ERROR = "llm_error"
    TOOL_ERROR = "tool_error"
    INVALID_ARGUMENTS = "invalid_arguments"
    UNKNOWN_TOOL = "unknown_tool"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    INTERNAL_ERROR = "internal_error"
    # The final answer never matched the agent's `response_format`, retries included.
    INVALID_OUTPUT = "invalid_output"
    # The conversation cannot be made to fit the model's input window.
    CONTEXT_WINDOW = "context_window"
    # A tool was asked to reach an address the SSRF guard refuses (private, loopback, metadata…)
    # or a host its tenant did not allow.
    DESTINATION_REFUSED = "destination_refused"
    # A `{"secret": NAME}` reference names no secret of the tenant.
    SECRET_NOT_FOUND = "secret_not_found"
    # A secret used outside its `usable_by`: by an agent, tool, MCP server, remote agent or
    # caller's roles it does not list.
    SECRET_OUT_OF_SCOPE = "secret_out_of_scope"
    # A tool was asked for something of its tenant that does not exist (a file, a todo).
    NOT_FOUND = "not_found"
    # A remote tool's server (MCP) could not be reached or refused the session.
    TOOL_UNAVAILABLE = "tool_unavailable"
    # The process running a call with side effects stopped before its result was stored;
    # the resumed run did not make it again (its tool is not `idempotent`).
    OUTCOME_UNKNOWN = "outcome_unknown"
    # A reviewer denied the call (or nobody decided in time): it was not made.
    APPROVAL_DENIED = "approval_denied"
    # A replay did not reproduce its recording, or a fork's agent did not repeat the steps
    # it was to take as recorded (the task's `replay_report` says where).
    REPLAY_DIVERGED = "replay_diverged"
    # A sub-agent's task did not complete (the message names its own error code).
    SUB_AGENT_FAILED = "sub_agent_failed"
    # A sub-agent call would nest agents deeper than OMNIFORGE_MAX_AGENT_DEPTH.
    AGENT_DEPTH_EXCEEDED = "agent_depth_exceeded"
    # A sub-agent call names an agent already working above it in its family.
    AGENT_CYCLE = "agent_cycle"
