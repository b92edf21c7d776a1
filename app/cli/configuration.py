"""The check every `omniforge` command makes first: the settings it uses, as far as it uses
them, before it touches anything; a problem is a `ConfigurationError` of one line."""

import argparse
from typing import TYPE_CHECKING

from pydantic import ValidationError

from app.config import InsecureSettings, Settings
from app.errors import OmniForgeError

if TYPE_CHECKING:
    from app.agents import AgentRuntime

EXIT_USAGE = 2
# The commands that build the agent runtime (`serve` only to check the models and tools).
RUNTIME_COMMANDS = ("serve", "run", "tools", "models")


class ConfigurationError(OmniForgeError):
    """Settings a command cannot work with; the message is one line naming the setting."""


def configured(args: argparse.Namespace) -> "tuple[Settings, AgentRuntime | None]":
    """The settings, checked as far as the command uses them, before it touches anything; and
    the runtime of the commands that need one (`serve` builds it only to check the models)."""
    command = args.command
    in_process_chat = command == "chat" and getattr(args, "server", None) is None
    try:
        settings = Settings()
        runtime = _runtime(settings, args) if command in RUNTIME_COMMANDS else None
        if in_process_chat:
            # The local service loads them: a broken plugin fails here first.
            _check_tools(settings)
        # In development these write the generated secret: only once the rest is known good.
        if command == "serve":
            settings.hs256_secret()
        elif command == "token":
            settings.resolved_jwt_secret()
        if in_process_chat:
            settings.hs256_secret()
        if command in ("serve", "secrets"):
            settings.resolved_secrets_keys()
        # Not `token`: a token is a signature; no database is read.
        if command in ("serve", "migrate", "tenant", "agents", "chat", "secrets"):
            check_database_url(settings.resolved_database_url())
    except ValidationError as exc:
        raise ConfigurationError(problems(exc)) from None
    except InsecureSettings as exc:
        raise ConfigurationError(_one_line(exc)) from None
    return settings, runtime


def _runtime(settings: Settings, args: argparse.Namespace) -> "AgentRuntime":
    """The runtime with the command's overrides; a bad model list or plugin is a configuration
    error. Imported here, not above: the runtime (without LiteLLM, which its gateway loads
    on first use) is half a second of start-up that the commands without one must not pay."""
    from app.agents import AgentRuntime, RuntimeSettings
    from app.llm import ModelConfigError
    from app.resources.toolbox import process_tools
    from app.tools.plugins import PluginError

    overrides = {
        "default_model": getattr(args, "model", None),
        "max_iterations": getattr(args, "max_iterations", None),
    }
    try:
        runtime_settings = RuntimeSettings.model_validate(settings).model_copy(
            update={key: value for key, value in overrides.items() if value}
        )
        # `models` needs no tools: a broken plugin must not hide the model list.
        tools = None if args.command == "models" else process_tools(settings)
        return AgentRuntime.build(runtime_settings, tools=tools, mode=getattr(args, "mode", "auto"))
    except ModelConfigError as exc:
        problem = _one_line(exc)
        if args.command == "run":  # always in process: say whose models those are
            problem += "; " + models_hint(
                settings, "submit to it through its API (POST /api/v1/tasks)"
            )
        raise ConfigurationError(problem) from None
    except PluginError as exc:
        raise ConfigurationError(_one_line(exc)) from None


def models_hint(settings: Settings, elsewhere: str) -> str:
    """Says whose models an in-process command knows: this machine's configuration, which a
    running service's (where the work may be meant to run) need not match."""
    where = (
        f"the model list {settings.models_file}"
        if settings.models_file is not None
        else "no model list (OMNIFORGE_MODELS_FILE is unset): the offline demo model alone"
    )
    return (
        f"in-process, the models are this machine's configuration's, {where}; a running "
        f"service may have others: {elsewhere}"
    )


def _check_tools(settings: Settings) -> None:
    from app.llm import ModelConfigError
    from app.resources.toolbox import process_tools
    from app.tools.plugins import PluginError

    try:
        process_tools(settings)
    except (ModelConfigError, PluginError) as exc:
        raise ConfigurationError(_one_line(exc)) from None


def problems(exc: ValidationError) -> str:
    """Each invalid setting by its variable name; the values are not echoed (secrets)."""
    found = []
    for error in exc.errors():
        message = " ".join(error["msg"].removeprefix("Value error, ").split())
        where = error["loc"]
        found.append(f"OMNIFORGE_{str(where[0]).upper()}: {message}" if where else message)
    return "; ".join(found)


def check_database_url(url: str) -> None:
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


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
