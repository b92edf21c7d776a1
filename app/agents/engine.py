"""The API an agent reasons with: every call goes through the executor and into the chain."""

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, ParamSpec, TypeVar
from uuid import UUID

from app.agents.compaction import COMPACTION, Compactor
from app.agents.images import without_images
from app.agents.models import AgentTask
from app.chain import (
    ErrorCode,
    ReasoningChain,
    ReasoningStep,
    StepType,
    StrategyEvent,
    SynthesisInfo,
    ThinkingInfo,
    ToolType,
    VisibilityConfig,
    VisibilityLevel,
)
from app.chain.errors import ChainAbort
from app.chain.models import StopReason
from app.tools.approvals import ApprovalGate
from app.tools.builtin.llm import LLM_TOOL_NAME, LLMTool
from app.tools.errors import InvalidToolArguments
from app.tools.executor import ToolExecutor
from app.tools.guards import ToolGuard
from app.tools.models import (
    CallEstimate,
    ModelAccess,
    OutputDelta,
    ToolCallContext,
    ToolDefinition,
    ToolProgress,
)
from app.tools.permissions import permits
from app.tools.registry import ToolRegistry
from app.tools.results import ToolInvocation, ToolResult
from app.tools.services import ToolServices

_P = ParamSpec("_P")
_T = TypeVar("_T")


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
        on_delta: Callable[[OutputDelta], None] | None = None,
        guards: Sequence[ToolGuard] = (),
        models: ModelAccess | None = None,
        compact_at: float | None = None,
        tools: ToolRegistry | None = None,
        services: ToolServices | None = None,
        on_progress: Callable[[ToolProgress], None] | None = None,
        approvals: ApprovalGate | None = None,
        stored: Callable[[], Awaitable[None]] | None = None,
        ready: Callable[[], Awaitable[None]] | None = None,
        starting: Callable[[], Awaitable[None]] | None = None,
        strategy: str | None = None,
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
            tools=tools,
            services=services,
            on_progress=on_progress,
            approvals=approvals,
            stored=stored,
            ready=ready,
            starting=starting,
            strategy=strategy,
        )
        # With `on_delta`, every LLM call streams its reply there as it arrives.
        self._on_delta = on_delta
        self._llm_context = replace(self._context, on_delta=on_delta)
        # The last LLM call's step number and conversation, to record the next one compactly.
        self._last_conversation: tuple[int, list[dict[str, Any]]] | None = None
        registry = tools or executor.registry
        self._tools = registry
        llm = registry.entry(LLM_TOOL_NAME).tool if LLM_TOOL_NAME in registry else None
        self._llm = llm if isinstance(llm, LLMTool) else None
        # The arguments of the call being fitted into its model's window.
        self._fitting: dict[str, Any] = {}
        self._fitting_one = asyncio.Lock()
        self._compactor = (
            None
            if compact_at is None or self._llm is None
            else Compactor(compact_at, self._prompt_tokens, self._summarise)
        )

    def use_strategy(self, name: str) -> None:
        """Makes the run's next calls `name`'s (`auto` handing the task to a strategy)."""
        self._context = replace(self._context, strategy=name)
        self._llm_context = replace(self._llm_context, strategy=name)

    def available_tools(self) -> list[ToolDefinition]:
        """The tools offered to the model: those this task may call and its caller may use,
        the LLM excluded."""
        allowed = self._context.allowed_tools
        return [
            definition
            for definition in self._tools.list_tools()
            if definition.type is not ToolType.LLM
            and self._tools.offered(definition.name, allowed)
            and permits(definition, self.task.roles)
        ]

    async def in_thread(self, work: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """`work` in one of the run's tenant's worker threads: CPU work too slow for the event
        loop (an answer checked against a schema whose patterns may backtrack)."""
        return await self._executor.threads.run(self.task.tenant_id, work, *args, **kwargs)

    def add_thinking(
        self,
        thought: str,
        *,
        confidence: float | None = None,
        visibility: VisibilityLevel = VisibilityLevel.FULL,
        parent_step_id: UUID | None = None,
        event: StrategyEvent | None = None,
        detail: dict[str, Any] | None = None,
    ) -> ReasoningStep:
        """A thought; a strategy's record names its `event` and carries its `detail`."""
        info = ThinkingInfo(thought=thought, confidence=confidence, event=event, detail=detail)
        return self.chain.add_step(
            ReasoningStep(
                type=StepType.THINKING,
                thinking=info,
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
        output: Any = None,
        stop_reason: StopReason | None = None,
    ) -> ReasoningStep:
        """The answer. `output`: the answer as JSON, matching the agent's `response_format`;
        `stop_reason`: the limit that stopped the run, which then ends `incomplete`."""
        synthesis = SynthesisInfo(
            conclusion=conclusion, sources=list(sources), output=output, stop_reason=stop_reason
        )
        return self.chain.add_step(
            ReasoningStep(
                type=StepType.SYNTHESIS,
                synthesis=synthesis,
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
        response_format: dict[str, Any] | None = None,
        stream: bool = True,
    ) -> LLMCallResult:
        """Calls a model with a `prompt` or `messages`, as a step pair of the `llm` tool.
        `stream=False`: its reply is not the answer being written, and none of it reaches
        the run's output deltas."""
        arguments: dict[str, Any] = {"model": model or self.default_model}
        optional = {
            "prompt": prompt,
            "messages": None if messages is None else list(messages),
            "system": system,
            "tools": list(tools) if tools else None,
            "temperature": temperature,
            "max_tokens": max_tokens or self._max_output_tokens,
            "stop": stop,
            "response_format": response_format,
        }
        arguments.update({key: value for key, value in optional.items() if value is not None})
        if messages is not None and self._compactor is not None and self._llm is not None:
            # What the model is sent may be compacted; the caller's messages stay whole. One
            # call is fitted at a time: a run's compaction is shared by all its calls.
            async with self._fitting_one:
                self._fitting = arguments
                window = self._llm.input_window(arguments, self._context.models)
                fitted = await self._compactor.fit(arguments["messages"], window)
            arguments["messages"] = fitted
            messages = fitted
        return await self._call(arguments, messages, parent_step_id, visibility, stream=stream)

    def llm_invocation(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
        model: str | None = None,
    ) -> ToolInvocation:
        """A call of `model` (default: the run's) with `messages`, for a batch of calls
        (`call_tools`); its conversation recorded whole, without the bytes of images."""
        optional = {
            "temperature": temperature,
            "max_tokens": max_tokens or self._max_output_tokens,
            "response_format": response_format,
        }
        conversation = list(messages)
        arguments: dict[str, Any] = {"model": model or self.default_model, "messages": conversation}
        arguments.update({key: value for key, value in optional.items() if value is not None})
        plain = without_images(conversation)
        recorded = None if plain is None else {**arguments, "messages": plain}
        return ToolInvocation(LLM_TOOL_NAME, arguments, recorded_arguments=recorded)

    async def call_llms(
        self,
        requests: Sequence[Sequence[dict[str, Any]]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
        parent_step_id: UUID | None = None,
        model: str | None = None,
    ) -> list[LLMCallResult]:
        """Independent calls of `model` (default: the run's), one per conversation of
        `requests`, made concurrently (a search's proposals, its evaluations): their calls
        are recorded first, in order, then their results in the same order, so a resumed run
        repeats them step for step. Nothing of their replies is streamed; their conversations
        are recorded whole (not compacted against one another)."""
        invocations = [
            self.llm_invocation(
                messages,
                temperature=temperature,
                max_tokens=max_tokens,
                response_format=response_format,
                model=model,
            )
            for messages in requests
        ]
        context = self._context
        if parent_step_id is not None:
            context = context.at(parent_step_id=parent_step_id)
        results = await self._executor.execute_batch(self.chain, context, invocations)
        return [LLMCallResult(result) for result in results]

    async def _call(
        self,
        arguments: dict[str, Any],
        messages: list[dict[str, Any]] | None,
        parent_step_id: UUID | None,
        visibility: VisibilityLevel | None,
        *,
        stream: bool = True,
    ) -> LLMCallResult:
        context = self._llm_context
        if not stream:
            context = self._context
        elif visibility is not None and self._on_delta is not None:
            # The call's step is stored at this level: its output is shown as the step is.
            context = replace(context, on_delta=_at_level(self._on_delta, visibility))
        if parent_step_id is not None:
            context = context.at(parent_step_id=parent_step_id)
        result = await self._executor.execute(
            self.chain,
            context,
            LLM_TOOL_NAME,
            arguments,
            visibility=visibility,
            recorded_arguments=self._recorded(arguments, messages),
        )
        if messages is not None:
            self._last_conversation = (result.call_step.step_number, list(messages))
        return LLMCallResult(result)

    async def _prompt_tokens(self, messages: list[dict[str, Any]]) -> int:
        """A prompt's tokens for the call being fitted, counted as the budget's estimate
        counts them (the model's tokenizer, its tools included)."""
        assert self._llm is not None
        arguments = {**self._fitting, "messages": messages}
        arguments.pop("purpose", None)
        estimate = await self._llm.estimate(arguments, self._context)
        return estimate.input_tokens

    async def _summarise(self, prompt: list[dict[str, Any]], max_tokens: int) -> str:
        """The compaction's own LLM call: a recorded step, within the budget."""
        arguments = {
            "model": self._fitting["model"],
            "messages": prompt,
            "max_tokens": max_tokens,
            "purpose": COMPACTION,
        }
        # Not the answer being written: nothing of it is streamed to readers.
        reply = await self._call(arguments, None, None, None, stream=False)
        if not reply.success:
            info = reply.result.info
            raise ChainAbort(
                ErrorCode.LLM_ERROR,
                f"summarising the earlier conversation failed: {info.error_code}: {info.error}",
            )
        return reply.content or ""

    async def estimate_llm(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: Sequence[str] | None = None,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
        added_input_tokens: int = 0,
        model: str | None = None,
    ) -> CallEstimate | None:
        """What the budget guard will estimate for `call_llm(messages=...)` with these
        arguments: prompt tokens counted, the output cap as output, the dearest model that
        may answer `model` (default: the run's). `added_input_tokens`: what the prompt will
        hold beyond `messages` by then. None when no such call can be made (no LLM tool, an
        unknown model)."""
        if self._llm is None:
            return None
        arguments: dict[str, Any] = {
            "model": model or self.default_model,
            "messages": list(messages),
        }
        optional = {
            "tools": list(tools) if tools else None,
            "max_tokens": max_tokens or self._max_output_tokens,
            "response_format": response_format,
        }
        arguments.update({key: value for key, value in optional.items() if value is not None})
        try:
            return await self._llm.estimate(
                arguments, self._context, added_input_tokens=added_input_tokens
            )
        except InvalidToolArguments:
            return None

    def _recorded(
        self, arguments: dict[str, Any], messages: list[dict[str, Any]] | None
    ) -> dict[str, Any] | None:
        """What the call's step records instead of `arguments`, if anything: the messages
        the last call did not record, without the bytes of their images."""
        compact = self._compact(arguments, messages)
        recorded = arguments if compact is None else compact
        shown = recorded.get("messages")
        plain = None if not isinstance(shown, list) else without_images(shown)
        if plain is not None:
            return {**recorded, "messages": plain}
        return compact

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


def _at_level(
    deliver: Callable[[OutputDelta], None], level: VisibilityLevel
) -> Callable[[OutputDelta], None]:
    def at_level(delta: OutputDelta) -> None:
        deliver(replace(delta, level=level))

    return at_level
