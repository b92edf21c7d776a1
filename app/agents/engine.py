"""The API an agent reasons with: every call goes through the executor and into the chain."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from app.agents.models import AgentTask
from app.chain import (
    ReasoningChain,
    ReasoningStep,
    StepType,
    SynthesisInfo,
    ThinkingInfo,
    ToolType,
    VisibilityConfig,
    VisibilityLevel,
)
from app.tools.builtin.llm import LLM_TOOL_NAME
from app.tools.executor import ToolExecutor
from app.tools.guards import ToolGuard
from app.tools.models import ModelAccess, ToolCallContext, ToolDefinition
from app.tools.permissions import permits
from app.tools.results import ToolInvocation, ToolResult


@dataclass(frozen=True, slots=True)
class ModelToolCall:
    """A tool call the model asked for; `arguments` is a dict, or raw text if invalid JSON."""

    id: str
    name: str
    arguments: dict[str, Any] | str


@dataclass(frozen=True, slots=True)
class LLMCallResult:
    """An LLM call's outcome with the steps that record it."""

    result: ToolResult

    @property
    def success(self) -> bool:
        return self.result.success

    @property
    def step_id(self) -> UUID:
        return self.result.result_step.id

    @property
    def content(self) -> str | None:
        value = self.result.value
        return value.get("content") if isinstance(value, dict) else None

    @property
    def tool_calls(self) -> list[ModelToolCall]:
        value = self.result.value
        if not isinstance(value, dict):
            return []
        return [ModelToolCall(c["id"], c["name"], c["arguments"]) for c in value["tool_calls"]]


class ReasoningEngine:
    """One task's handle on the chain and the tools. Steps reach the chain's listeners the
    moment they are added."""

    def __init__(
        self,
        chain: ReasoningChain,
        executor: ToolExecutor,
        task: AgentTask,
        *,
        default_model: str,
        max_output_tokens: int | None = None,
        on_delta: Callable[[str], None] | None = None,
        guards: Sequence[ToolGuard] = (),
        models: ModelAccess | None = None,
    ) -> None:
        self.chain = chain
        self.task = task
        self.default_model = task.model or default_model
        self._executor = executor
        self._max_output_tokens = max_output_tokens
        allowed = None if task.tools is None else frozenset([*task.tools, LLM_TOOL_NAME])
        self._context = ToolCallContext(
            task_id=task.id,
            agent_id=chain.agent_id,
            chain_id=chain.id,
            tenant_id=task.tenant_id,
            user_id=task.user_id,
            allowed_tools=allowed,
            roles=task.roles,
            guards=tuple(guards),
            models=models,
        )
        self._llm_context = replace(self._context, on_delta=on_delta)
        # The last LLM call's step number and conversation, to record the next one compactly.
        self._last_conversation: tuple[int, list[dict[str, Any]]] | None = None

    def available_tools(self) -> list[ToolDefinition]:
        """The tools offered to the model: those this task may call and its caller may use,
        the LLM excluded."""
        allowed = self._context.allowed_tools
        return [
            definition
            for definition in self._executor.registry.list_tools()
            if definition.type is not ToolType.LLM
            and (allowed is None or definition.name in allowed)
            and permits(definition, self.task.roles)
        ]

    def add_thinking(
        self,
        thought: str,
        *,
        confidence: float | None = None,
        visibility: VisibilityLevel = VisibilityLevel.FULL,
        parent_step_id: UUID | None = None,
    ) -> ReasoningStep:
        return self.chain.add_step(
            ReasoningStep(
                type=StepType.THINKING,
                thinking=ThinkingInfo(thought=thought, confidence=confidence),
                visibility=VisibilityConfig(level=visibility),
                parent_step_id=parent_step_id,
            )
        )

    def add_synthesis(
        self,
        conclusion: str,
        sources: Sequence[UUID],
        *,
        visibility: VisibilityLevel = VisibilityLevel.FULL,
    ) -> ReasoningStep:
        return self.chain.add_step(
            ReasoningStep(
                type=StepType.SYNTHESIS,
                synthesis=SynthesisInfo(conclusion=conclusion, sources=list(sources)),
                visibility=VisibilityConfig(level=visibility),
            )
        )

    async def call_llm(
        self,
        *,
        prompt: str | None = None,
        messages: list[dict[str, Any]] | None = None,
        system: str | None = None,
        model: str | None = None,
        tools: Sequence[str] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
        parent_step_id: UUID | None = None,
        visibility: VisibilityLevel | None = None,
    ) -> LLMCallResult:
        """Calls a model with a `prompt` or `messages`, as a step pair of the `llm` tool."""
        arguments: dict[str, Any] = {"model": model or self.default_model}
        optional = {
            "prompt": prompt,
            "messages": None if messages is None else list(messages),
            "system": system,
            "tools": list(tools) if tools else None,
            "temperature": temperature,
            "max_tokens": max_tokens or self._max_output_tokens,
            "stop": stop,
        }
        arguments.update({key: value for key, value in optional.items() if value is not None})
        context = self._llm_context
        if parent_step_id is not None:
            context = context.at(parent_step_id=parent_step_id)
        result = await self._executor.execute(
            self.chain,
            context,
            LLM_TOOL_NAME,
            arguments,
            visibility=visibility,
            recorded_arguments=self._compact(arguments, messages),
        )
        if messages is not None:
            self._last_conversation = (result.call_step.step_number, list(messages))
        return LLMCallResult(result)

    def _compact(
        self, arguments: dict[str, Any], messages: list[dict[str, Any]] | None
    ) -> dict[str, Any] | None:
        """`arguments` with the part of `messages` the last LLM call already recorded
        replaced by a reference to it; None when there is nothing to share."""
        if messages is None or self._last_conversation is None:
            return None
        step_number, earlier = self._last_conversation
        shared = len(earlier)
        if shared == 0 or len(messages) < shared or messages[:shared] != earlier:
            return None
        return {
            **arguments,
            "messages": messages[shared:],
            "history": {"step": step_number, "messages": shared},
        }

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | str,
        *,
        parent_step_id: UUID | None = None,
        visibility: VisibilityLevel | None = None,
    ) -> ToolResult:
        [result] = await self.call_tools(
            [ToolInvocation(name, arguments, visibility)], parent_step_id=parent_step_id
        )
        return result

    async def call_tools(
        self, invocations: Sequence[ToolInvocation], *, parent_step_id: UUID | None = None
    ) -> list[ToolResult]:
        """Runs independent calls concurrently; results come back in call order."""
        context = self._context
        if parent_step_id is not None:
            context = context.at(parent_step_id=parent_step_id)
        return await self._executor.execute_batch(self.chain, context, invocations)
