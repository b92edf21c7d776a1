"""What `omniforge run`, `tools` and `models` print: a run's chain step by step as it happens
(or its events as JSON lines), the tools with their schemas, the models with their prices."""

import json
import sys
from decimal import Decimal
from typing import TextIO
from uuid import UUID

from app.agents import AgentRuntime, AgentTask, CoTAgent
from app.chain import (
    ChainCompletedEvent,
    ChainEvent,
    ChainFailedEvent,
    ChainMetrics,
    ReasoningStep,
    ReasoningStepEvent,
    ToolType,
    format_usd,
)
from app.cli.wording import STRATEGY_LABELS, counted
from app.tools.models import OutputDelta

EXIT_OK, EXIT_FAILED = 0, 1
_PREVIEW_CHARS = 160


async def watch(
    runtime: AgentRuntime,
    agent: CoTAgent,
    label: str,
    task: AgentTask,
    *,
    as_json: bool,
    stream: bool,
) -> int:
    """Runs the task, printing its chain as it grows; 0 when it completed, else 1."""
    out = sys.stdout
    if not as_json:
        model = task.model or runtime.settings.default_model
        print(f"OmniForge · task {task.id} · model {model} · agent {label}", file=out)
    on_delta = _DeltaPrinter(out) if stream and not as_json else None
    llm_calls: set[UUID] = set()
    outcome = EXIT_FAILED
    async for event in agent.process_task(task, on_delta=on_delta):
        if as_json:
            print(event.model_dump_json(), file=out, flush=True)
        else:
            if on_delta is not None:
                on_delta.end_line()
            _print_event(event, out, llm_calls)
        if isinstance(event, ChainCompletedEvent):
            outcome = EXIT_OK
    return outcome


def _print_event(event: ChainEvent, out: TextIO, llm_calls: set[UUID]) -> None:
    if isinstance(event, ReasoningStepEvent):
        call = event.step.tool_call
        if call is not None and call.tool_type is ToolType.LLM:
            llm_calls.add(call.correlation_id)
        print(_describe_step(event.step, llm_calls), file=out, flush=True)
    elif isinstance(event, ChainCompletedEvent):
        print(f"\nCompleted · {_totals(event.metrics)}", file=out, flush=True)
    elif isinstance(event, ChainFailedEvent):
        print(
            f"\nFailed ({event.error_code}): {event.error_message}\n{_totals(event.metrics)}",
            file=out,
            flush=True,
        )


def _describe_step(step: ReasoningStep, llm_calls: set[UUID]) -> str:
    label = f"[{step.step_number}]"
    if step.thinking is not None:
        event = step.thinking.event
        what = "thought" if event is None else STRATEGY_LABELS.get(event, event)
        return f"{label} {what:<14} {step.thinking.thought}"
    if step.synthesis is not None:
        return f"{label} final answer   {step.synthesis.conclusion}"
    if step.tool_call is not None:
        call = step.tool_call
        if call.tool_type is ToolType.LLM:
            tools = call.arguments.get("tools")
            suffix = f" tools={','.join(tools)}" if tools else ""
            return f"{label} llm call       model={call.model}{suffix}"
        return f"{label} tool call      {call.tool_name} {_preview(call.arguments)}"
    result = step.tool_result
    assert result is not None
    is_llm = result.correlation_id in llm_calls
    lines = [f"{label} {'llm result' if is_llm else 'tool result':<14} "]
    if result.success:
        if is_llm:
            cost = "unpriced" if result.cost_usd is None else f"${format_usd(result.cost_usd)}"
            lines[0] += (
                f"{result.model} via {result.deployment} · {result.input_tokens} in / "
                f"{result.output_tokens} out tokens · {cost}"
            )
        else:
            lines[0] += _preview(result.result)
    else:
        lines[0] += f"FAILED {result.error_code}: {result.error}"
    lines[0] += f" · {result.duration_ms:.1f} ms"
    if result.attempts > 1:
        lines[0] += f" · {result.attempts} attempts"
    lines.extend(
        f"      failed: attempt {f.attempt} {f.deployment or ''} {f.error_class}"
        f"{f' ({f.status_code})' if f.status_code else ''}: {f.message}"
        for f in result.failed_attempts
    )
    return "\n".join(lines)


def _totals(metrics: ChainMetrics) -> str:
    tools = metrics.tool_calls - metrics.llm_calls
    unpriced = (
        f" (+{counted(metrics.unpriced_calls, 'unpriced call')})" if metrics.unpriced_calls else ""
    )
    return (
        f"{counted(metrics.total_steps, 'step')} · {counted(metrics.llm_calls, 'LLM call')} · "
        f"{counted(tools, 'other tool call')} · {counted(metrics.total_tokens, 'token')} "
        f"({metrics.input_tokens} in, {metrics.output_tokens} out) · "
        f"${format_usd(metrics.total_cost_usd)}{unpriced} · "
        f"{metrics.total_duration_ms:.1f} ms in calls"
    )


def _preview(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…"


def list_tools(runtime: AgentRuntime, *, as_json: bool) -> int:
    definitions = runtime.registry.list_tools()
    if as_json:
        print(json.dumps([d.to_openai_tool() for d in definitions], indent=2))
        return EXIT_OK
    for definition in definitions:
        print(f"{definition.name} ({definition.type}) — {definition.description}")
        print(f"  parameters: {json.dumps(definition.parameters)}")
    return EXIT_OK


def list_models(runtime: AgentRuntime, *, as_json: bool) -> int:
    gateway = runtime.gateway
    rows = []
    for name in gateway.model_names():
        for deployment in gateway.deployments(name):
            price = deployment.price
            rows.append(
                {
                    "model": name,
                    "deployment": deployment.id,
                    "litellm_model": deployment.litellm_model,
                    "native_tools": deployment.supports_tools,
                    "vision": deployment.supports_vision,
                    "input_cost_per_token": _price(price.input_cost_per_token if price else None),
                    "output_cost_per_token": _price(price.output_cost_per_token if price else None),
                    "fallbacks": gateway.fallbacks(name),
                    "default": name == gateway.default_model,
                }
            )
    if as_json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    for row in rows:
        label = (
            "unpriced"
            if row["input_cost_per_token"] is None
            else f"${row['input_cost_per_token']}/${row['output_cost_per_token']} per token in/out"
        )
        default = " (default)" if row["default"] else ""
        print(f"{row['model']}{default} · {row['deployment']} → {row['litellm_model']} · {label}")
    return EXIT_OK


def _price(value: Decimal | None) -> str | None:
    return None if value is None else format_usd(value)


class _DeltaPrinter:
    """Prints the model's streamed answer text as it arrives, on its own indented line (its
    reasoning, where a provider streams it apart, is left to the steps)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._open = False

    def __call__(self, delta: OutputDelta) -> None:
        if delta.kind != "content":
            return
        text = delta.text
        if not self._open:
            self._out.write("      ")
            self._open = True
        self._out.write(text.replace("\n", "\n      "))
        self._out.flush()

    def end_line(self) -> None:
        if self._open:
            self._out.write("\n")
            self._open = False
