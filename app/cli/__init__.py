"""`omniforge`: serve the API, mint tokens, migrate; run a task in-process and watch its
chain live; list tools and models. The configuration is checked before a command does anything:
a problem is one line on stderr and exit status 2."""

# Every module imported here is light: building the parser imports no command's dependencies,
# and each command imports its own (LiteLLM and the agent runtime only for those that run
# agents) when it runs, so `--help` or `token` start in a fraction of a second.

import argparse
import gc
import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING

from app.cli import agents, api_keys, chat, run, secrets, service, tenants, tokens

if TYPE_CHECKING:
    from app.config import Settings

# The commands that take the checked settings; the others (`run`, `tools`, `models`) take the
# runtime too.
_SERVICE_COMMANDS: dict[str, Callable[[argparse.Namespace, "Settings"], int]] = {
    "serve": service.serve,
    "migrate": service.migrate,
    "token": tokens.run,
    "openapi": service.openapi,
    "tenant": tenants.run,
    "agents": agents.run,
    "chat": chat.run,
    "secrets": secrets.run,
    "api-key": api_keys.run,
}


# What a command's work imports beyond its runtime, loaded with the rest of its start-up (below).
_LOADS = {"serve": "app.api"}
# The commands that call models at once load LiteLLM (seconds of CPU) with their start-up too;
# `serve` is ready without it and loads it in the background.
_LOADS_LLM = ("run", "models")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # As the program (no `argv`: the command line's), start-up runs with the collector paused;
    # code calling `main` with its own arguments (a test, in a process it shares) is left as is.
    with _starting() if argv is None else nullcontext():
        # Imported once the command line is known good: the settings' own import is a tenth
        # of a second that `--help` (or a usage error) need not pay.
        from app.cli.configuration import EXIT_USAGE, ConfigurationError, configured

        try:
            settings, runtime = configured(args)
        except ConfigurationError as exc:
            print(f"omniforge: configuration error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if args.command in _LOADS:
            importlib.import_module(_LOADS[args.command])
        if runtime is not None and args.command in _LOADS_LLM:
            runtime.gateway.load()
    if args.command in _SERVICE_COMMANDS:
        return _SERVICE_COMMANDS[args.command](args, settings)
    assert runtime is not None
    return run.run(args, settings, runtime)


@contextmanager
def _starting() -> Iterator[None]:
    """Start-up with the cyclic garbage collector paused, then what it built frozen.

    Start-up makes hundreds of thousands of objects that live as long as the process (modules,
    classes, LiteLLM's and the OpenAI SDK's tables) and next to no garbage, yet the collector
    would walk them all again at each of its passes: a third of `serve`'s CPU before it is
    ready. Frozen (`gc.freeze`), they are also left out of every later full collection, which
    a long-running service makes often."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="omniforge", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    # In the order `omniforge --help` lists them.
    run.add_run_command(commands)
    service.add_serve_commands(commands)
    tokens.add_command(commands)
    tenants.add_command(commands)
    agents.add_commands(commands)
    chat.add_command(commands)
    secrets.add_command(commands)
    api_keys.add_command(commands)
    service.add_openapi_command(commands)
    run.add_listing_commands(commands)
    return parser
