"""`omniforge run|tools|models`: run a task in-process with the ReAct agent and watch its chain
live; list the tools and the models. These commands get the agent runtime, built only for
them (LiteLLM loaded with it for `run` and `models`)."""

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.agents import AgentRuntime, CoTAgent
    from app.config import Settings
    from app.runs.agents import ResolvedAgent

EXIT_FAILED, EXIT_INTERRUPTED = 1, 130


def add_run_command(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
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
    run.add_argument(
        "--kind",
        help="the strategy: direct, cot, react, tot, mcts, plan, auto or a plugin's "
        "(default: the agent's)",
    )
    run.add_argument("--agent", help="an agent definition, `name` or `name@N` (of --tenant)")
    run.add_argument("--tenant", default="default", help="the tenant of --agent")
    run.add_argument("--json", action="store_true", help="print the events as JSON lines")
    run.add_argument("--stream", action="store_true", help="show model output as it streams")


def add_listing_commands(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    tools = commands.add_parser("tools", help="list the tools with their JSON schemas")
    tools.add_argument("--json", action="store_true", help="print OpenAI-style tool specs")
    models = commands.add_parser("models", help="list the configured models and prices")
    models.add_argument("--json", action="store_true", help="print as JSON")


def run(args: argparse.Namespace, settings: "Settings", runtime: "AgentRuntime") -> int:
    """Runs `omniforge run`, `tools` or `models` with the runtime the configuration check
    built."""
    from app.agents import AgentSpec, AgentTask
    from app.cli.run_output import list_models, list_tools, watch

    if args.command == "tools":
        return list_tools(runtime, as_json=args.json)
    if args.command == "models":
        return list_models(runtime, as_json=args.json)
    tools = args.tools.split(",") if args.tools else None
    agent: CoTAgent = runtime.agent
    label, model = "default@1", None
    spec = AgentSpec()
    if args.agent:
        try:
            resolved = asyncio.run(_agent(settings, args.tenant, args.agent))
        except LookupError as exc:
            print(f"omniforge: {exc}", file=sys.stderr)
            return EXIT_FAILED
        definition = resolved.definition
        agent, label, model = runtime.agent_for(definition.spec()), resolved.ref, definition.model
        tools = tools if tools is not None else definition.tools
        spec = definition.spec()
    if args.kind:
        if args.kind not in runtime.kinds:
            known = ", ".join(runtime.kinds.names())
            print(f"omniforge: no strategy {args.kind!r} (available: {known})", file=sys.stderr)
            return EXIT_FAILED
        agent = runtime.agent_for(spec.model_copy(update={"kind": args.kind}))
    task = AgentTask(input=args.task, tools=tools, model=model)
    try:
        return asyncio.run(
            watch(runtime, agent, label, task, as_json=args.json, stream=args.stream)
        )
    except KeyboardInterrupt:
        print("\ninterrupted: the run was cancelled", file=sys.stderr)
        return EXIT_INTERRUPTED


async def _agent(settings: "Settings", tenant: str, ref: str) -> "ResolvedAgent":
    """The agent version `ref` names in `tenant`, from the configured database (`LookupError`
    when there is none, or it is archived)."""
    from app.resources.agents import AgentArchived
    from app.runs.agents import resolve_agent
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
