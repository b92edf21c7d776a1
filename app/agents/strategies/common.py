"""What the built-in strategies share: the task's conversation, a model call that fails the
strategy when the model cannot answer, and an answer checked against the agent's
`response_format` before it concludes the run."""

import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self
from uuid import UUID

from app.agents.base import AgentParts, CoTAgent
from app.agents.engine import LLMCallResult, ReasoningEngine
from app.agents.models import AgentTask
from app.agents.on_limit import FinalCallReserve, limit_message
from app.agents.output import InvalidResponseFormat, OutputFormat
from app.agents.spec import AgentSpec, OnLimit, StrategyOptions
from app.chain import ErrorCode
from app.chain.errors import ChainAbort
from app.chain.models import StopReason
from app.llm import LLMGateway
from app.tools.executor import ToolExecutor

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_ANSWER_LINE = re.compile(r"^[ \t]*\**answer\**[ \t]*:[ \t]*", re.IGNORECASE | re.MULTILINE)
_CONFIDENCE = re.compile(r"^[ \t]*\**confidence\**[ \t]*:[ \t]*(?P<value>\S+)[ \t]*$", re.I | re.M)


class LowConfidence(ChainAbort):
    """A strategy's answer is less sure than the agent's `min_confidence`."""

    def __init__(self, confidence: float, threshold: float) -> None:
        super().__init__(
            ErrorCode.INVALID_OUTPUT,
            f"the answer's confidence {confidence:.2f} is under the agent's "
            f"min_confidence {threshold:.2f}",
            details={"confidence": confidence, "min_confidence": threshold},
        )
        self.confidence = confidence


@dataclass(slots=True)
class Answer:
    """What a strategy concludes: the answer's text, the steps it rests on, how sure the
    strategy is of it (None: it does not say)."""

    text: str
    sources: list[UUID] = field(default_factory=list)
    confidence: float | None = None
    # The budget limit the run answered at instead of going on (`on_limit: answer`).
    stop_reason: StopReason | None = None


class StrategyAgent(CoTAgent):
    """A built-in strategy: `solve` finds an answer, which is checked against the agent's
    `response_format` and becomes the run's synthesis. A strategy that cannot answer raises
    `ChainAbort`; under `auto`, that is a fallback to a simpler one."""

    strategy: ClassVar[str]

    def __init__(
        self,
        executor: ToolExecutor,
        gateway: LLMGateway,
        *,
        default_model: str,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        instructions: str | None = None,
        response_format: dict[str, Any] | None = None,
        options: StrategyOptions | None = None,
        on_limit: OnLimit = "fail",
        fallback_model: str | None = None,
    ) -> None:
        super().__init__(executor, default_model=default_model, max_output_tokens=max_output_tokens)
        self.gateway = gateway
        self.temperature = temperature
        self.instructions = instructions
        self.response_format = response_format
        self.options = options or StrategyOptions()
        self.on_limit = on_limit
        self.fallback_model = fallback_model
        # The model of every call this strategy makes; None: the run's (`auto` steps down to
        # the fallback model by setting it).
        self.model: str | None = None

    @classmethod
    def from_spec(cls, spec: AgentSpec, parts: AgentParts) -> Self:
        return cls(
            parts.executor,
            parts.gateway,
            default_model=spec.model or parts.default_model,
            max_output_tokens=spec.max_output_tokens or parts.max_output_tokens,
            temperature=spec.temperature,
            instructions=spec.instructions,
            response_format=spec.response_format,
            options=spec.strategy,
            on_limit=spec.on_limit,
            fallback_model=spec.fallback_model,
        )

    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        answer = await self.solve(task, engine)
        await self.conclude(engine, answer)

    async def solve(self, task: AgentTask, engine: ReasoningEngine) -> Answer:
        raise NotImplementedError

    async def conclude(
        self, engine: ReasoningEngine, answer: Answer, *, min_confidence: float | None = None
    ) -> None:
        """Ends the run with `answer` once it matches the `response_format` (and, when
        given, is at least `min_confidence` sure); raises `ChainAbort` otherwise. An answer
        made at a limit (`stop_reason`) is the run's last: one that misses the format stays
        the result, without an output, and the run ends `incomplete`."""
        output = None
        form = self.output_format()
        if form is not None:
            check = await engine.in_thread(form.check, answer.text)
            errors = "; ".join(check.errors)
            if not check.valid and answer.stop_reason is None:
                raise ChainAbort(
                    ErrorCode.INVALID_OUTPUT,
                    f"the {self.strategy} answer does not match the agent's response_format: "
                    f"{errors}",
                    details={"errors": list(check.errors)},
                )
            if not check.valid:
                engine.add_thinking(
                    "The final answer does not match the response format; it stays the "
                    f"result, without an output: {errors}"
                )
            output = check.value
        if (
            min_confidence is not None
            and answer.stop_reason is None
            and answer.confidence is not None
            and answer.confidence < min_confidence
        ):
            raise LowConfidence(answer.confidence, min_confidence)
        engine.add_synthesis(
            answer.text, answer.sources, output=output, stop_reason=answer.stop_reason
        )

    async def limit_reached(
        self,
        engine: ReasoningEngine,
        messages: list[dict[str, Any]],
        *,
        calls: int = 1,
        tools: list[str] | None = None,
    ) -> StopReason | None:
        """With `on_limit: answer`, the budget limit that calls for the final answer now
        instead of `calls` more calls of about `messages`; None while they and the final
        call fit, and always with `on_limit: fail` (the guard then ends the run at the
        limit)."""
        if self.on_limit != "answer":
            return None
        return await self.reserve(engine).stop_before(messages, tools, calls=calls)

    async def final_answer(
        self,
        engine: ReasoningEngine,
        messages: list[dict[str, Any]],
        reason: StopReason,
        sources: list[UUID],
        *,
        parent_step_id: UUID | None = None,
    ) -> Answer:
        """The run's last call, without tools: the model is told why and answers from what
        `messages` hold, and the run ends `incomplete` with `reason`. It is made on the
        agent's `fallback_model` when the budget left cannot pay for the shortest answer on
        the run's own, its output capped to what the budget leaves."""
        prompt = [*messages, limit_message(reason, None, text_format=False)]
        reserve = self.reserve(engine)
        model = self.model
        if self.fallback_model is not None and not await reserve.affords_final(prompt, model):
            model = self.fallback_model
        max_tokens = await reserve.final_max_tokens(prompt, model)
        reply = await self.call(
            engine,
            prompt,
            stream=True,
            parent_step_id=parent_step_id,
            max_tokens=max_tokens,
            model=model,
        )
        text = split_answer(reply.content or "")
        return Answer(text, [*sources, reply.step_id], stop_reason=reason)

    def reserve(self, engine: ReasoningEngine) -> FinalCallReserve:
        """What keeps back the run's last answer (its schema, if any, is in its prompt)."""
        return FinalCallReserve(engine, self.max_output_tokens, None, text_format=False)

    def output_format(self) -> OutputFormat | None:
        if self.response_format is None:
            return None
        try:
            return OutputFormat(self.response_format)
        except InvalidResponseFormat as exc:
            raise ChainAbort(
                ErrorCode.INVALID_OUTPUT,
                f"the agent's response_format is not a usable JSON Schema: {exc}",
            ) from exc

    def system_prompt(self, strategy_prompt: str) -> str:
        """The agent's instructions first, then how this strategy wants its answer, then the
        answer's schema when there is one."""
        parts = [self.instructions, strategy_prompt]
        form = self.output_format()
        if form is not None:
            parts.append(form.instructions(text_format=False))
        return "\n\n".join(part for part in parts if part)

    def system_prompt_plain(self, prompt: str) -> str:
        """A search step's system prompt: the agent's instructions, then the step's own (the
        answer's schema is for the answer alone)."""
        return "\n\n".join(part for part in (self.instructions, prompt) if part)

    def conversation(self, task: AgentTask, system: str) -> list[dict[str, Any]]:
        return [{"role": "system", "content": system}, *task.history, *task.conversation()]

    async def call(
        self,
        engine: ReasoningEngine,
        messages: list[dict[str, Any]],
        *,
        stream: bool = True,
        parent_step_id: UUID | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
    ) -> LLMCallResult:
        """One call without tools, of `model` (default: the strategy's); a call that fails
        fails the strategy."""
        reply = await engine.call_llm(
            messages=messages,
            model=model or self.model,
            temperature=self.temperature,
            max_tokens=max_tokens,
            stream=stream,
            parent_step_id=parent_step_id,
        )
        return succeeded(reply)


def succeeded(reply: LLMCallResult) -> LLMCallResult:
    if not reply.success:
        info = reply.result.info
        raise ChainAbort(
            ErrorCode.LLM_ERROR,
            f"the model call failed after {info.attempts} attempt(s): "
            f"{info.error_code}: {info.error}",
        )
    return reply


def json_object(text: str) -> dict[str, Any] | None:
    """The JSON object a reply holds (alone, fenced, or amid prose); None if none."""
    text = text.strip()
    candidates = [text]
    found = _JSON_OBJECT.search(text)
    if found is not None and found.group(0) != text:
        candidates.append(found.group(0))
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):  # nested deeper than a parser goes
            continue
        if isinstance(value, dict):
            return value
    return None


def score_of(value: Any) -> float | None:
    """A score in [0, 1] as a model wrote it (a number, or a numeric string); None if not."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, int | float) and 0 <= value <= 1:
        return float(value)
    return None


def judgement(reply: LLMCallResult) -> tuple[float, str]:
    """A scoring reply (`{"score", "reason"}`) as (score, reason); an unreadable one, or a
    failed call, scores 0 and says why."""
    if not reply.success:
        info = reply.result.info
        return 0.0, f"not scored: the call failed ({info.error_code})"
    document = json_object(reply.content or "") or {}
    score = score_of(document.get("score"))
    if score is None:
        return 0.0, "not scored: the reply held no score from 0 to 1"
    reason = document.get("reason")
    return score, reason.strip() if isinstance(reason, str) and reason.strip() else "no reason"


def task_text(task: AgentTask) -> str:
    """The text of a task's messages (its parts of text, in order)."""
    parts: list[str] = []
    for message in task.conversation():
        content: Any = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(
                part["text"]
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
    return "\n".join(parts)


def split_reasoning(reply: str) -> tuple[str, str, float | None]:
    """A reply that may reason first as (reasoning, answer, confidence): the answer after its
    last `Answer:` line (the whole reply when it has none), the confidence its last
    `Confidence:` line before that states."""
    markers = list(_ANSWER_LINE.finditer(reply))
    if not markers:
        return "", reply.strip(), None
    last = markers[-1]
    reasoning, answer = reply[: last.start()], reply[last.end() :].strip()
    confidence = None
    stated = list(_CONFIDENCE.finditer(reasoning))
    if stated:
        confidence = score_of(stated[-1]["value"])
        reasoning = reasoning[: stated[-1].start()] + reasoning[stated[-1].end() :]
    return reasoning.strip(), answer, confidence


def split_answer(reply: str) -> str:
    """The answer of a reply that may reason first (see `split_reasoning`)."""
    return split_reasoning(reply)[1]
