"""`omniforge`: serve the API, mint tokens, migrate; run a task in-process and watch its
chain live; list tools and models. The configuration is checked before a command does anything:
a problem is one line on stderr and exit status 2."""

import argparse
import asyncio
import json
import logging
import logging.config
import sys
from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from uuid import UUID

from pydantic import ValidationError

from app import cli_agents, cli_api_keys, cli_chat, cli_secrets
from app.agents import AgentRuntime, AgentTask, CoTAgent, RuntimeSettings
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
from app.config import InsecureSettings, Settings
from app.llm import ModelConfigError
from app.resources.toolbox import process_tools
from app.security import mint_token
from app.tools.models import OutputDelta
from app.tools.plugins import PluginError

if TYPE_CHECKING:
    from app.runs.agents import ResolvedAgent

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
_PREVIEW_CHARS = 160


class ConfigurationError(Exception):
    """Settings a command cannot work with; the message is one line naming the setting."""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings, runtime = _configured(args)
    except ConfigurationError as exc:
        print(f"omniforge: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.command in _SERVICE_COMMANDS:
        return _SERVICE_COMMANDS[args.command](args, settings)
    assert runtime is not None
    if args.command == "tools":
        return _list_tools(runtime, as_json=args.json)
    if args.command == "models":
        return _list_models(runtime, as_json=args.json)
    tools = args.tools.split(",") if args.tools else None
    agent: CoTAgent = runtime.agent
    label, model = "default@1", None
    if args.agent:
        try:
            resolved = asyncio.run(_agent(settings, args.tenant, args.agent))
        except LookupError as exc:
            print(f"omniforge: {exc}", file=sys.stderr)
            return EXIT_FAILED
        definition = resolved.definition
        agent, label, model = runtime.agent_for(definition.spec()), resolved.ref, definition.model
        tools = tools if tools is not None else definition.tools
    task = AgentTask(input=args.task, tools=tools, model=model)
    try:
        return asyncio.run(_run(runtime, agent, label, task, as_json=args.json, stream=args.stream))
    except KeyboardInterrupt:
        print("\ninterrupted: the run was cancelled", file=sys.stderr)
        return EXIT_INTERRUPTED


def _configured(args: argparse.Namespace) -> tuple[Settings, AgentRuntime | None]:
    """The settings, checked as far as the command uses them, before it touches anything; and
    the runtime of the commands that need one (`serve` builds it only to check the models)."""
    command = args.command
    try:
        settings = Settings()
        runtime = None
        if command in ("serve", "run", "tools", "models"):
            overrides = {
                "default_model": getattr(args, "model", None),
                "max_iterations": getattr(args, "max_iterations", None),
            }
            runtime_settings = RuntimeSettings.model_validate(settings).model_copy(
                update={key: value for key, value in overrides.items() if value}
            )
            # `models` needs no tools: a broken plugin must not hide the model list.
            tools = None if command == "models" else process_tools(settings)
            runtime = AgentRuntime.build(
                runtime_settings, tools=tools, mode=getattr(args, "mode", "auto")
            )
        if command == "chat" and getattr(args, "server", None) is None:
            # The local service loads them: a broken plugin fails here first.
            process_tools(settings)
        # In development these write the generated secret: only once the rest is known good.
        if command == "serve":
            settings.hs256_secret()
        elif command == "token":
            settings.resolved_jwt_secret()
        if command == "chat" and getattr(args, "server", None) is None:
            settings.hs256_secret()
        if command in ("serve", "secrets"):
            settings.resolved_secrets_keys()
        if command in ("serve", "migrate", "token", "tenant", "agents", "chat", "secrets"):
            _check_database_url(settings.resolved_database_url())
    except ValidationError as exc:
        raise ConfigurationError(_problems(exc)) from None
    except (InsecureSettings, ModelConfigError, PluginError) as exc:
        raise ConfigurationError(" ".join(str(exc).split())) from None
    return settings, runtime


def _problems(exc: ValidationError) -> str:
    """Each invalid setting by its variable name; the values are not echoed (secrets)."""
    problems = []
    for error in exc.errors():
        message = " ".join(error["msg"].removeprefix("Value error, ").split())
        where = error["loc"]
        problems.append(f"OMNIFORGE_{str(where[0]).upper()}: {message}" if where else message)
    return "; ".join(problems)


def _check_database_url(url: str) -> None:
    """Builds (never connects) the engine the commands will use, so that a malformed URL or a
    missing driver is a configuration error rather than a traceback half-way through."""
    from sqlalchemy.exc import ArgumentError, InvalidRequestError

    from app.storage import Database

    try:
        Database(url)  # never connected: nothing to dispose
    except (ArgumentError, InvalidRequestError, ImportError) as exc:
        raise ConfigurationError(
            f"OMNIFORGE_DATABASE_URL cannot be used: {' '.join(str(exc).split())} "
            "(use postgresql+asyncpg://… or sqlite+aiosqlite:///…)"
        ) from None


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from app.api import create_app
    from app.api.listeners import serve
    from app.observability.json_logs import json_log_config

    if settings.log_format == "json":
        # Every line JSON from the first, the migration's included.
        logging.config.dictConfig(json_log_config())
    url = _migrate_database(settings)
    if settings.log_format == "json":
        logging.getLogger("app.cli").info("database %s is at the latest schema", url)
    else:
        print(f"omniforge: database {url} is at the latest schema", file=sys.stderr)
    serve(
        create_app(settings),
        host=args.host,
        port=args.port,
        metrics_port=settings.metrics_port,
        grace_s=settings.shutdown_grace_s,
    )
    return EXIT_OK


def _migrate(args: argparse.Namespace, settings: Settings) -> int:
    url = _migrate_database(settings)
    print(f"omniforge: database {url} is at the latest schema", file=sys.stderr)
    return EXIT_OK


def _migrate_database(settings: Settings) -> str:
    from app.storage import Database, upgrade_to_head

    async def migrate() -> str:
        database = Database(settings.resolved_database_url())
        try:
            await upgrade_to_head(database)
        finally:
            await database.dispose()
        return database.url.render_as_string(hide_password=True)

    return asyncio.run(migrate())


def _token(args: argparse.Namespace, settings: Settings) -> int:
    refusal = asyncio.run(_token_refusal(settings, args.tenant))
    if refusal is not None:
        print(f"omniforge: {refusal}", file=sys.stderr)
        return EXIT_FAILED
    roles = [role.strip() for role in args.roles.split(",") if role.strip()]
    print(
        mint_token(
            settings.resolved_jwt_secret(),
            tenant_id=args.tenant,
            subject=args.sub,
            roles=roles,
            ttl=args.ttl,
            issuer=settings.jwt_issuer or None,
            audience=settings.jwt_audience or None,
        )
    )
    return EXIT_OK


async def _token_refusal(settings: Settings, tenant_id: str) -> str | None:
    """Why no token should be minted for `tenant_id` (the API would refuse it), if so. The
    database is migrated first; in development the `default` tenant is made, as the server
    does at start-up."""
    from app.governance.tenants import command_tenant
    from app.storage import Database

    database = Database(settings.resolved_database_url())
    try:
        tenant = await command_tenant(
            database, tenant_id, development=settings.env == "development"
        )
    finally:
        await database.dispose()
    if tenant is None:
        return (
            f"no tenant {tenant_id!r}: create it first with "
            f"`omniforge tenant create NAME --id {tenant_id}`"
        )
    if not tenant.is_active:
        return (
            f"tenant {tenant_id!r} is disabled: enable it with "
            f"`omniforge tenant enable {tenant_id}`"
        )
    return None


def _openapi(args: argparse.Namespace, settings: Settings) -> int:
    from app.api.openapi import openapi_json

    document = openapi_json(settings)
    if args.output is None:
        sys.stdout.write(document)
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(document, encoding="utf-8")
    return EXIT_OK


def _tenant(args: argparse.Namespace, settings: Settings) -> int:
    from app.governance.admin import TenantCommandError, run_tenant_command

    _migrate_database(settings)
    try:
        lines = asyncio.run(run_tenant_command(settings, args))
    except TenantCommandError as exc:
        print(f"omniforge: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for line in lines:
        print(line)
    return EXIT_OK


_SERVICE_COMMANDS = {
    "serve": _serve,
    "migrate": _migrate,
    "token": _token,
    "openapi": _openapi,
    "tenant": _tenant,
    "agents": cli_agents.run,
    "chat": cli_chat.run,
    "secrets": cli_secrets.run,
    "api-key": cli_api_keys.run,
}


def _duration(text: str) -> timedelta:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    value, unit = text[:-1], text[-1:]
    if unit not in units or not value.isdigit() or int(value) == 0:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (try 90s, 30m, 12h, 7d)")
    return timedelta(seconds=int(value) * units[unit])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="omniforge", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a task with the ReAct agent and show its chain")
    run.add_argument("task", help="what to do, in plain words")
    run.add_argument("--model", help="a model name of the model list (default: the default)")
    run.add_argument("--tools", help="comma-separated tools the agent may use (default: all)")
    run.add_argument("--max-iterations", type=int, help="ReAct iterations before giving up")
    run.add_argument(
        "--mode",
        choices=["auto", "native", "text"],
        default="auto",
        help="tool calling: native, text ReAct, or auto (native when the model supports it)",
    )
    run.add_argument("--agent", help="an agent definition, `name` or `name@N` (of --tenant)")
    run.add_argument("--tenant", default="default", help="the tenant of --agent")
    run.add_argument("--json", action="store_true", help="print the events as JSON lines")
    run.add_argument("--stream", action="store_true", help="show model output as it streams")
    serve = commands.add_parser("serve", help="migrate the database, then serve the HTTP API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    commands.add_parser("migrate", help="bring the database schema to the latest revision")
    token = commands.add_parser(
        "token", help="mint a bearer token (HS256) for an existing, active tenant"
    )
    token.add_argument("--tenant", required=True, help="the tenant id (`tenant_id` claim)")
    token.add_argument("--sub", required=True, help="the user id (`sub` claim)")
    token.add_argument("--roles", default="member", help="comma-separated roles")
    token.add_argument("--ttl", default="1h", type=_duration, help="lifetime: 90s, 30m, 12h, 7d")
    tenant = commands.add_parser("tenant", help="create, list, disable or enable tenants")
    tenant_commands = tenant.add_subparsers(dest="tenant_command", required=True)
    create = tenant_commands.add_parser("create", help="create a tenant; prints its id")
    create.add_argument("name", help="its display name")
    create.add_argument("--id", help="the id tokens carry (default: derived from the name)")
    create.add_argument("--tools", help="comma-separated tools its runs may use (default: all)")
    tenant_commands.add_parser("list", help="list tenants: id, status, name")
    for verb in ("disable", "enable"):
        command = tenant_commands.add_parser(verb, help=f"{verb} a tenant")
        command.add_argument("id", help="the tenant id")
    cli_agents.add_commands(commands)
    cli_chat.add_command(commands)
    cli_secrets.add_command(commands)
    cli_api_keys.add_command(commands, _duration)
    openapi = commands.add_parser("openapi", help="print the API's OpenAPI document")
    openapi.add_argument("--output", type=Path, help="write it here (openapi/openapi.json)")
    tools = commands.add_parser("tools", help="list the tools with their JSON schemas")
    tools.add_argument("--json", action="store_true", help="print OpenAI-style tool specs")
    models = commands.add_parser("models", help="list the configured models and prices")
    models.add_argument("--json", action="store_true", help="print as JSON")
    return parser


async def _agent(settings: Settings, tenant: str, ref: str) -> "ResolvedAgent":
    """The agent version `ref` names in `tenant`, from the configured database (`LookupError`
    when there is none, or it is archived)."""
    from app.runs.agents import AgentArchived, resolve_agent
    from app.storage import Database, upgrade_to_head

    database = Database(settings.resolved_database_url())
    try:
        await upgrade_to_head(database)
        async with database.read() as connection:
            try:
                return await resolve_agent(connection, tenant, ref)
            except AgentArchived as exc:
                raise LookupError(str(exc)) from None
    finally:
        await database.dispose()


async def _run(
    runtime: AgentRuntime,
    agent: CoTAgent,
    label: str,
    task: AgentTask,
    *,
    as_json: bool,
    stream: bool,
) -> int:
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
        return f"{label} thought        {step.thinking.thought}"
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
    unpriced = f" (+{metrics.unpriced_calls} unpriced calls)" if metrics.unpriced_calls else ""
    return (
        f"{metrics.total_steps} steps · {metrics.llm_calls} LLM calls · {tools} other tool calls · "
        f"{metrics.total_tokens} tokens ({metrics.input_tokens} in, {metrics.output_tokens} out) · "
        f"${format_usd(metrics.total_cost_usd)}{unpriced} · "
        f"{metrics.total_duration_ms:.1f} ms in calls"
    )


def _preview(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…"


def _list_tools(runtime: AgentRuntime, *, as_json: bool) -> int:
    definitions = runtime.registry.list_tools()
    if as_json:
        print(json.dumps([d.to_openai_tool() for d in definitions], indent=2))
        return EXIT_OK
    for definition in definitions:
        print(f"{definition.name} ({definition.type}) — {definition.description}")
        print(f"  parameters: {json.dumps(definition.parameters)}")
    return EXIT_OK


def _list_models(runtime: AgentRuntime, *, as_json: bool) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
