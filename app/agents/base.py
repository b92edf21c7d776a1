"""CoTAgent, the base of every agent kind: what the runtime builds one from (`AgentParts`), and
`start`, which runs its `reason(task, engine)` as an `AgentRun` (`app.agents.run`)."""

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, Self

from app.agents.engine import ReasoningEngine
from app.agents.models import AgentTask
from app.agents.run import AgentRun
from app.agents.run_events import RunEvents, StampedOutput
from app.agents.spec import AgentSpec
from app.chain import ApprovalDecidedEvent, ChainEvent, ReasoningChain
from app.llm import LLMGateway
from app.tools.approvals import ApprovalGate
from app.tools.executor import ToolExecutor
from app.tools.guards import ToolGuard
from app.tools.models import ModelAccess, OutputDelta
from app.tools.registry import ToolRegistry
from app.tools.services import ToolServices

ToolCallingMode = Literal["auto", "native", "text"]


@dataclass(frozen=True, slots=True)
class AgentParts:
    """What the runtime gives every agent it builds: the executor and gateway of the process,
    and the defaults of what a spec leaves unset."""

    executor: ToolExecutor
    gateway: LLMGateway
    default_model: str
    max_iterations: int
    max_output_tokens: int | None
    mode: ToolCallingMode = "auto"
    # Compact a prompt past this share of its model's input window (None: never).
    compact_at: float | None = None
    # Answers that miss a `response_format` the model may correct before its task fails.
    output_retries: int = 2


class CoTAgent(ABC):
    """An agent whose every operation is a tool call recorded in a reasoning chain.

    Subclasses implement `reason`. A run always ends its chain: `chain_completed`, or
    `chain_failed` with an `error_code` (a `ChainAbort` names it; anything else is
    `internal_error`), then `done`.
    """

    agent_id: ClassVar[str] = "cot"
    # The kind it was built as (`AgentKinds.build` sets it): the strategy its calls' cost
    # records name; None: its `agent_id`.
    kind: str | None = None
    # Prompts past this share of their model's input window are compacted before the call
    # (None: never); the runtime sets it on the agents it builds.
    compact_at: float | None = None

    def __init__(
        self,
        executor: ToolExecutor,
        *,
        default_model: str,
        max_output_tokens: int | None = None,
    ) -> None:
        self.executor = executor
        self.default_model = default_model
        self.max_output_tokens = max_output_tokens

    @classmethod
    def from_spec(cls, spec: AgentSpec, parts: AgentParts) -> Self:
        """An agent of this kind for one task of a definition. Kinds whose constructor takes
        more than the executor override it."""
        return cls(
            parts.executor,
            default_model=spec.model or parts.default_model,
            max_output_tokens=spec.max_output_tokens or parts.max_output_tokens,
        )

    @abstractmethod
    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        """Works on the task through `engine`; returns when done, raises `ChainAbort` to
        fail the chain with a code."""

    def start(
        self,
        task: AgentTask,
        *,
        chain: ReasoningChain | None = None,
        on_delta: Callable[[OutputDelta], None] | None = None,
        guards: Sequence[ToolGuard] = (),
        models: ModelAccess | None = None,
        tools: ToolRegistry | None = None,
        services: ToolServices | None = None,
        approvals: ApprovalGate | None = None,
        decided: Sequence[ApprovalDecidedEvent] = (),
    ) -> AgentRun:
        """Starts reasoning in a background task; events are buffered until read. `guards`
        watch this run's calls besides the executor's own (its budget, its tenant's limits);
        `models` says which models it may reach; `tools` are the tools it may find (its
        tenant's own besides the process's) and `services` what they reach (secrets, files...).
        A budget set on `chain` is enforced for duration here, and reported on every step. With
        `on_delta`, LLM calls stream and each piece of their replies is handed to it the moment
        it arrives, its `after` set. Tools' progress reports become `tool_progress` events.
        `approvals` says which calls wait for a human; a resumed run applies its decisions and
        reports them (`decided`) after its `task_status`."""
        chain = chain or ReasoningChain(
            task_id=task.id, agent_id=self.agent_id, tenant_id=task.tenant_id
        )
        output = None if on_delta is None else StampedOutput(on_delta)
        events = RunEvents(task.id, chain, output)
        engine = ReasoningEngine(
            chain,
            self.executor,
            task,
            default_model=self.default_model,
            max_output_tokens=self.max_output_tokens,
            on_delta=output,
            guards=guards,
            models=models,
            compact_at=self.compact_at,
            tools=tools,
            services=services,
            on_progress=events.progress,
            approvals=approvals,
            stored=events.stored,
            ready=events.may_call,
            starting=events.starting,
            strategy=self.kind or self.agent_id,
        )
        return AgentRun(
            self,
            task,
            engine,
            events,
            resumed=chain.resuming,
            decided=decided,
        )

    async def process_task(
        self, task: AgentTask, *, on_delta: Callable[[OutputDelta], None] | None = None
    ) -> AsyncIterator[ChainEvent]:
        """Runs the task and yields its events, ending with `done`."""
        async for event in self.start(task, on_delta=on_delta).events():
            yield event
