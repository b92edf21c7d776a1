"""Builds the agent runtime from its settings: gateway, tools, executor, agent."""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from app.agents.base import AgentParts, CoTAgent, ToolCallingMode
from app.agents.kinds import AgentKinds
from app.agents.react import ReActAgent
from app.agents.spec import AgentSpec
from app.bulkheads import TenantThreads
from app.llm import LLMGateway, load_model_list
from app.tools.base import BaseTool
from app.tools.builtin import builtin_tools
from app.tools.builtin.llm import LLMTool
from app.tools.executor import ToolExecutor
from app.tools.guards import ToolGuard
from app.tools.models import RetryPolicy
from app.tools.permissions import ToolPermissionGuard
from app.tools.recording import CostRecorder
from app.tools.registry import ToolRegistry


class RuntimeSettings(BaseModel):
    """What the runtime needs of a process's settings. The agents layer owns it so that it
    never depends on the service's configuration; the fields carry the same names as the
    service's `OMNIFORGE_*` settings, so whoever holds those builds it with
    `RuntimeSettings.model_validate(settings)`."""

    model_config = ConfigDict(frozen=True, from_attributes=True)

    models_file: Path | None
    default_model: str
    max_iterations: int
    max_result_chars: int
    llm_timeout_s: float
    llm_request_timeout_s: float
    llm_openai_sdk: bool
    llm_direct_http: bool = True
    llm_max_attempts: int
    llm_initial_backoff_s: float
    llm_max_backoff_s: float
    llm_max_output_tokens: int
    compact_at: float = 0.8
    output_retries: int = 2


@dataclass(frozen=True, slots=True)
class AgentRuntime:
    """Everything a process needs to run tasks; build once at start-up."""

    settings: RuntimeSettings
    gateway: LLMGateway
    registry: ToolRegistry
    executor: ToolExecutor
    agent: ReActAgent
    """The built-in default agent (a spec with nothing set)."""
    kinds: AgentKinds
    parts: AgentParts

    async def loaded(self) -> None:
        """Returns once the runtime can run a task without loading anything (its gateway's
        LiteLLM side, seconds of CPU), the load started in a background thread if need be;
        raises what stopped it loading."""
        await self.gateway.loaded()

    @property
    def is_loaded(self) -> bool:
        """Whether `loaded` would return at once."""
        return self.gateway.is_loaded

    def agent_for(self, spec: AgentSpec) -> CoTAgent:
        """A new agent for one task of a definition (`UnknownAgentKind` for a kind this
        process does not have)."""
        return self.kinds.build(spec, self.parts)

    @classmethod
    def build(
        cls,
        settings: RuntimeSettings,
        *,
        tools: Sequence[BaseTool] | None = None,
        guards: Sequence[ToolGuard] = (),
        recorder: CostRecorder | None = None,
        mode: ToolCallingMode = "auto",
        kinds: AgentKinds | None = None,
    ) -> "AgentRuntime":
        # Worker threads for CPU work done on a tenant's behalf, a fair share each.
        threads = TenantThreads()
        gateway = LLMGateway(
            load_model_list(settings.models_file),
            default_model=settings.default_model,
            request_timeout_s=settings.llm_request_timeout_s,
            default_max_tokens=settings.llm_max_output_tokens,
            openai_sdk=settings.llm_openai_sdk,
            threads=threads,
            direct=settings.llm_direct_http,
        )
        registry = ToolRegistry(list(builtin_tools() if tools is None else tools))
        retry = RetryPolicy(
            max_attempts=settings.llm_max_attempts,
            initial_backoff_s=settings.llm_initial_backoff_s,
            max_backoff_s=settings.llm_max_backoff_s,
        )
        registry.register(LLMTool(gateway, registry, timeout_s=settings.llm_timeout_s, retry=retry))
        executor = ToolExecutor(
            registry,
            guards=[ToolPermissionGuard(), *guards],
            recorder=recorder,
            max_result_chars=settings.max_result_chars,
            threads=threads,
        )
        parts = AgentParts(
            executor,
            gateway,
            default_model=settings.default_model,
            max_iterations=settings.max_iterations,
            max_output_tokens=settings.llm_max_output_tokens,
            mode=mode,
            compact_at=settings.compact_at,
            output_retries=settings.output_retries,
        )
        kinds = kinds or AgentKinds.with_plugins()
        agent = ReActAgent.from_spec(AgentSpec(), parts)
        agent.compact_at = parts.compact_at
        return cls(settings, gateway, registry, executor, agent, kinds, parts)
