"""`plan`: the model writes a plan — a graph of steps — which is checked (re-asked once with
what is wrong), recorded, then run in waves: every step whose dependencies are done runs in
the same wave, at most `max_parallel_steps` at once, as one batch of calls (a `reasoning`
step is a call of the model, a `tool` step a call of its tool, an `agent` step a call of the
sub-agent). Each reasoning step's output is capped to its carved share of what the budget
leaves (its estimate, scaled to what is left); an output that fills the cap overran it. A
step's output is checked against its contract (`output_schema`). A failed step is tried once
more (`step_retries`); failing again, or overrunning, has the model revise the rest of the
plan (`max_replans`), told what failed. Last, one call writes the answer from the steps'
outputs.

Every wave is one batch of the executor: its calls are recorded first, in order, then their
results in the same order, so a resumed run repeats the plan step for step — finished steps
answered from the store, not made or billed again — and goes on where it stopped. The plan's
records are `thinking` steps: `plan_created` (detail: the graph), `plan_step_started`,
`plan_step_completed`, `plan_step_failed`, `plan_revised` (the new graph and why) and
`plan_completed`."""

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from uuid import UUID

from app.agents.engine import ReasoningEngine
from app.agents.models import AgentTask
from app.agents.output import InvalidResponseFormat, OutputFormat
from app.agents.strategies.common import Answer, StrategyAgent, split_answer, task_text
from app.agents.strategies.plan_model import Plan, PlanStep, read_plan
from app.chain import BudgetLimit, ErrorCode, StrategyEvent, ToolType
from app.chain.errors import ChainAbort
from app.tools.results import ToolInvocation, ToolResult

PLAN_PROMPT = """\
Plan how to do the task as a graph of steps, which run in parallel wherever they do not \
depend on one another. Reply with only JSON:
{{"steps": [{{"id": "<short-id>", "description": "<what the step does>", \
"type": "reasoning" | "tool" | "agent", "strategy": "direct" | "cot", \
"tool": "<a tool or agent name, for tool and agent steps>", "arguments": {{<a tool step's \
arguments>}}, "depends_on": ["<ids of steps it needs first>"], "expected_output": "<what it \
gives>", "estimated_calls": <model calls it needs: 1 to reason, 0 for a tool>}}]}}
At most {max_steps} steps. A reasoning step thinks one part through. Tools: {tools}. \
Agents: {agents}. The final answer is written from the steps' outputs afterwards: do not \
add a step for it."""

REVISE_PROMPT = """\
A step of the plan failed. Revise the rest of the plan: give the steps still to do (not the \
finished ones, which later steps may depend on by id), in the same JSON form.
Finished steps: {done}
Failed: {failed}"""

REASON_PROMPTS = {
    "direct": "Do this one step of a larger task, directly and concisely. Reply with its "
    "result alone.",
    "cot": "Do this one step of a larger task. Think it through step by step, then write, on "
    "a line of its own, `Answer:` followed by the step's result alone.",
}

SYNTHESIS_PROMPT = """\
Write the final answer to the task from the results of the plan's steps. Reply with the \
answer alone."""

_MIN_STEP_TOKENS = 16


@dataclass(slots=True)
class _Outcome:
    output: str
    steps: list[UUID]  # the steps that record it: its call's and the result
    error: str | None = None
    overran: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(slots=True)
class _Run:
    plan: Plan
    revision: int = 0
    done: dict[str, _Outcome] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    sources: list[UUID] = field(default_factory=list)


class PlanAgent(StrategyAgent):
    """Plans, runs the plan in waves, revises it when a step fails, answers from it."""

    agent_id = "plan"
    strategy = "plan"

    async def solve(self, task: AgentTask, engine: ReasoningEngine) -> Answer:
        options = self.options.plan
        tools, agents = self._callables(engine)
        plan = await self._new_plan(task, engine, tools, agents)
        run = _Run(plan)
        engine.add_thinking(
            f"Plan of {_steps(len(plan.steps))}: "
            + "; ".join(f"{s.id}: {s.description}" for s in plan.steps),
            event=StrategyEvent.PLAN_CREATED,
            detail={"steps": plan.graph(), "revision": 0},
        )
        while pending := [s for s in run.plan.steps if s.id not in run.done]:
            ready = [s for s in pending if all(d in run.done for d in s.depends_on)]
            if not ready:  # a revised plan's step depends on a step that never finished
                raise ChainAbort(
                    ErrorCode.TOOL_ERROR,
                    f"plan steps {', '.join(s.id for s in pending)} wait for steps that failed",
                )
            wave = ready[: options.max_parallel_steps]
            outcomes = await self._run_wave(task, engine, run, wave)
            failed: list[tuple[PlanStep, _Outcome]] = []
            for step, outcome in zip(wave, outcomes, strict=True):
                attempt = run.failures.get(step.id, 0) + 1
                if outcome.ok:
                    run.done[step.id] = outcome
                    run.sources.extend(outcome.steps)
                    engine.add_thinking(
                        f"Step {step.id} done: {outcome.output}",
                        event=StrategyEvent.PLAN_STEP_COMPLETED,
                        detail={"step": step.id, "attempt": attempt},
                    )
                    continue
                run.failures[step.id] = attempt
                engine.add_thinking(
                    f"Step {step.id} failed (attempt {attempt}): {outcome.error}",
                    event=StrategyEvent.PLAN_STEP_FAILED,
                    detail={
                        "step": step.id,
                        "attempt": attempt,
                        "error": outcome.error,
                        "overran": outcome.overran,
                    },
                )
                if outcome.overran or attempt > options.step_retries:
                    failed.append((step, outcome))
            if failed:
                await self._revise(task, engine, run, failed, tools, agents)
        engine.add_thinking(
            f"Plan completed: {_steps(len(run.done))}, {run.revision} revision(s)",
            event=StrategyEvent.PLAN_COMPLETED,
            detail={"steps": len(run.done), "revisions": run.revision},
        )
        return await self._synthesise(task, engine, run)

    def _callables(self, engine: ReasoningEngine) -> tuple[set[str], set[str]]:
        """The tools and the sub-agents a plan's steps may call."""
        tools: set[str] = set()
        agents: set[str] = set()
        for definition in engine.available_tools():
            (agents if definition.type is ToolType.SUB_AGENT else tools).add(definition.name)
        return tools, agents

    async def _new_plan(
        self,
        task: AgentTask,
        engine: ReasoningEngine,
        tools: set[str],
        agents: set[str],
        revise: str | None = None,
        done: tuple[str, ...] = (),
    ) -> Plan:
        """The model's plan, asked again once with what is wrong with it."""
        options = self.options.plan
        prompt = PLAN_PROMPT.format(
            max_steps=options.max_steps,
            tools=", ".join(sorted(tools)) or "none",
            agents=", ".join(sorted(agents)) or "none",
        )
        messages = self.conversation(task, self.system_prompt_plain(prompt))
        if revise is not None:
            messages.append({"role": "user", "content": revise})
        problems: list[str] = []
        for _ in range(2):
            reply = await self.call(engine, messages, stream=False)
            content = reply.content or ""
            plan, problems = read_plan(
                content,
                tools=tools,
                agents=agents,
                max_steps=options.max_steps,
                calls_left=self._calls_left(engine),
                done=done,
            )
            if plan is not None:
                return plan
            listed = "\n".join(f"- {problem}" for problem in problems)
            messages.extend(
                [
                    {"role": "assistant", "content": content},
                    {
                        "role": "user",
                        "content": f"The plan cannot run:\n{listed}\nReply with the corrected "
                        "plan, only JSON.",
                    },
                ]
            )
        raise ChainAbort(
            ErrorCode.INVALID_OUTPUT,
            f"the model's plan could not run, asked twice: {'; '.join(problems)}",
            details={"errors": problems},
        )

    async def _revise(
        self,
        task: AgentTask,
        engine: ReasoningEngine,
        run: _Run,
        failed: list[tuple[PlanStep, _Outcome]],
        tools: set[str],
        agents: set[str],
    ) -> None:
        options = self.options.plan
        why = "; ".join(f"{step.id}: {outcome.error}" for step, outcome in failed)
        if run.revision >= options.max_replans:
            raise ChainAbort(
                ErrorCode.TOOL_ERROR,
                f"plan steps failed and the plan was revised {run.revision} time(s), the most "
                f"allowed: {why}",
            )
        done = "; ".join(f"{key}: {outcome.output}" for key, outcome in run.done.items())
        failures = "; ".join(
            f"{step.id} ({step.description}): {outcome.error}" for step, outcome in failed
        )
        revise = REVISE_PROMPT.format(done=done or "none", failed=failures)
        plan = await self._new_plan(task, engine, tools, agents, revise, tuple(run.done))
        run.revision += 1
        run.plan = Plan(steps=[*(s for s in run.plan.steps if s.id in run.done), *plan.steps])
        for step in plan.steps:
            run.failures.pop(step.id, None)
        engine.add_thinking(
            f"Plan revised ({why}): " + "; ".join(f"{s.id}: {s.description}" for s in plan.steps),
            event=StrategyEvent.PLAN_REVISED,
            detail={"steps": plan.graph(), "revision": run.revision, "reason": why},
        )

    async def _run_wave(
        self, task: AgentTask, engine: ReasoningEngine, run: _Run, wave: list[PlanStep]
    ) -> list[_Outcome]:
        """The wave's steps as one batch of calls."""
        invocations: list[ToolInvocation] = []
        for step in wave:
            invocation, cap = await self._invocation(task, engine, run, step)
            invocations.append(invocation)
            engine.add_thinking(
                f"Step {step.id} started: {step.description}",
                event=StrategyEvent.PLAN_STEP_STARTED,
                detail={
                    "step": step.id,
                    "type": step.type,
                    "attempt": run.failures.get(step.id, 0) + 1,
                    "max_tokens": cap,
                },
            )
        results = await engine.call_tools(invocations)
        return [
            await self._outcome(engine, step, result, invocation)
            for step, result, invocation in zip(wave, results, invocations, strict=True)
        ]

    async def _invocation(
        self, task: AgentTask, engine: ReasoningEngine, run: _Run, step: PlanStep
    ) -> tuple[ToolInvocation, int | None]:
        inputs = "\n".join(
            f"[{dep}] {run.done[dep].output}" for dep in step.depends_on if dep in run.done
        )
        if step.type == "tool":
            return ToolInvocation(step.tool or "", step.arguments), None
        if step.type == "agent":
            text = step.description + (f"\n\nWhat it builds on:\n{inputs}" if inputs else "")
            return ToolInvocation(step.tool or "", {"task": text}), None
        system = self.system_prompt_plain(REASON_PROMPTS[step.strategy])
        if step.output_schema is not None:
            system += (
                "\n\nThe step's result must be a single JSON value matching this JSON Schema: "
                f"{step.output_schema}"
            )
        content = f"Task:\n{task_text(task)}\n\nThis step: {step.description}"
        if step.expected_output:
            content += f"\nIt should give: {step.expected_output}"
        if inputs:
            content += f"\n\nResults it builds on:\n{inputs}"
        messages = [{"role": "system", "content": system}, {"role": "user", "content": content}]
        cap = await self._carved(engine, run, step, messages)
        return engine.llm_invocation(
            messages, temperature=self.temperature, max_tokens=cap, model=self.model
        ), cap

    async def _carved(
        self,
        engine: ReasoningEngine,
        run: _Run,
        step: PlanStep,
        messages: list[dict[str, Any]],
    ) -> int | None:
        """The step's output cap: its share of what the budget leaves, in proportion to its
        estimated calls among the steps still to run and the answer's one call."""
        left = engine.chain.left()
        tokens, cost = left.get(BudgetLimit.MAX_TOKENS), left.get(BudgetLimit.MAX_COST_USD)
        if tokens is None and cost is None:
            return None
        pending = [s for s in run.plan.steps if s.id not in run.done]
        weight = max(1, step.estimated_calls) / (
            sum(max(1, s.estimated_calls) for s in pending if s.type == "reasoning") + 1
        )
        estimate = await engine.estimate_llm(messages, model=self.model)
        if estimate is None:
            return None
        cap = estimate.max_output_tokens
        if tokens is not None:
            cap = min(cap, int(tokens * weight) - estimate.input_tokens)
        if cost is not None and estimate.cost_usd:
            share = Decimal(cost) * Decimal(weight)
            cap = min(cap, int(estimate.max_output_tokens * (share / estimate.cost_usd)))
        return max(_MIN_STEP_TOKENS, cap)

    async def _outcome(
        self,
        engine: ReasoningEngine,
        step: PlanStep,
        result: ToolResult,
        invocation: ToolInvocation,
    ) -> _Outcome:
        recorded = [result.call_step.id, result.result_step.id]
        if not result.success:
            return _Outcome("", recorded, error=f"{result.error_code}: {result.error}")
        value = result.value
        if step.type == "reasoning":
            reply = value if isinstance(value, dict) else {}
            output = split_answer(str(reply.get("content") or ""))
            if reply.get("finish_reason") == "length":
                cap = (
                    invocation.arguments.get("max_tokens")
                    if isinstance(invocation.arguments, dict)
                    else None
                )
                return _Outcome(
                    output,
                    recorded,
                    error=f"its output reached its carved cap of {cap} tokens",
                    overran=True,
                )
        else:
            output = _text(value)
        if step.output_schema is None:
            return _Outcome(output, recorded)
        try:
            check = await engine.in_thread(OutputFormat(step.output_schema).check, output)
        except InvalidResponseFormat as exc:
            return _Outcome(output, recorded, error=f"its output_schema is unusable: {exc}")
        if not check.valid:
            return _Outcome(
                output, recorded, error=f"its output misses its contract: {'; '.join(check.errors)}"
            )
        return _Outcome(output, recorded)

    async def _synthesise(self, task: AgentTask, engine: ReasoningEngine, run: _Run) -> Answer:
        results = "\n".join(
            f"[{step.id}] {step.description}: {run.done[step.id].output}"
            for step in run.plan.steps
            if step.id in run.done
        )
        messages = self.conversation(task, self.system_prompt(SYNTHESIS_PROMPT))
        messages.append({"role": "user", "content": f"Results of the plan's steps:\n{results}"})
        reply = await self.call(engine, messages)
        return Answer(split_answer(reply.content or ""), [*run.sources, reply.step_id])

    def _calls_left(self, engine: ReasoningEngine) -> int | None:
        """The model calls the budget leaves for the steps (the answer's kept back)."""
        left = engine.chain.left().get(BudgetLimit.MAX_LLM_CALLS)
        return None if left is None else max(0, int(left) - 1)


def _text(value: Any) -> str:
    """A tool's or sub-agent's result as a later step is told it: its text, a sub-agent's
    answer, else its JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("answer"), str):
        return str(value["answer"])
    return json.dumps(value, ensure_ascii=False, default=str)


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"
