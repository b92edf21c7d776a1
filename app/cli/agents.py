"""`omniforge agents apply|list`: agent definitions kept as YAML files, one agent per file,
applied the way the API applies them. In-process on the configured database by default (as a
tenant admin of `--tenant`, audited with the operating-system user as the actor), or through a
running service with `--server URL --token T` (the token's tenant and roles decide)."""

import argparse
import asyncio
import getpass
import json
import math
import sys
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from app.errors import OmniForgeError

if TYPE_CHECKING:
    import httpx

    from app.api.agents.schemas import AgentCreate, AgentOut
    from app.config import Settings
    from app.governance.callers import Caller
    from app.governance.tenants import Tenant
    from app.storage import Database

# As every `omniforge` command: done, failed, or refused before changing anything.
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class CommandFailed(OmniForgeError):
    """What stopped a command: one line per problem, its exit status, and the lines of what
    it had done before (printed first)."""

    def __init__(
        self, lines: list[str], status: int = EXIT_FAILED, *, done: list[str] | None = None
    ) -> None:
        super().__init__("; ".join(lines))
        self.lines = lines
        self.status = status
        self.done = done or []


@dataclass(frozen=True, slots=True)
class DefinitionFile:
    path: Path
    body: "AgentCreate"


def add_commands(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    agents = commands.add_parser("agents", help="apply agent definitions from YAML; list agents")
    verbs = agents.add_subparsers(dest="agents_command", required=True)
    apply = verbs.add_parser(
        "apply",
        help="create each agent a file defines, or version it when its definition changed",
    )
    apply.add_argument(
        "-f",
        "--file",
        required=True,
        type=Path,
        help="a YAML file, or a directory of them (*.yaml, *.yml; applied in name order)",
    )
    listing = verbs.add_parser("list", help="list agents: name, newest version, status")
    listing.add_argument("--archived", action="store_true", help="include archived agents")
    for verb in (apply, listing):
        verb.add_argument(
            "--tenant",
            default="default",
            help="in-process: the tenant whose agents these are (default: default)",
        )
        verb.add_argument("--server", help="the service's base URL (default: in-process)")
        verb.add_argument("--token", help="with --server: a bearer token of the tenant")


def run(args: argparse.Namespace, settings: "Settings") -> int:
    """Runs `omniforge agents …`; problems are one line each on stderr."""
    try:
        if args.server is not None and not args.token:
            raise CommandFailed(["--server needs --token (mint one with `omniforge token`)"])
        if args.agents_command == "apply":
            files = load_definitions(args.file)
            if args.server is not None:
                lines = _apply_remotely(args.server, args.token, files)
            else:
                lines = asyncio.run(_apply_locally(settings, args.tenant, files))
        elif args.server is not None:
            lines = _list_remotely(args.server, args.token, archived=args.archived)
        else:
            lines = asyncio.run(_list_locally(settings, args.tenant, archived=args.archived))
    except CommandFailed as exc:
        for line in exc.done:
            print(line)
        for line in exc.lines:
            print(f"omniforge: {line}", file=sys.stderr)
        return exc.status
    for line in lines:
        print(line)
    return EXIT_OK


def load_definitions(target: Path) -> list[DefinitionFile]:
    """Every definition `target` holds, each checked as the API checks a body; any problem
    (of any file) refuses them all, so that nothing is applied."""
    if target.is_dir():
        paths = sorted(p for p in target.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        if not paths:
            raise CommandFailed([f"{target}: no *.yaml or *.yml file"], EXIT_USAGE)
    elif target.is_file():
        paths = [target]
    else:
        raise CommandFailed([f"{target}: no such file or directory"], EXIT_USAGE)
    files: list[DefinitionFile] = []
    problems: list[str] = []
    seen: dict[str, Path] = {}
    for path in paths:
        try:
            body = _definition(path)
        except CommandFailed as exc:
            problems.extend(exc.lines)
            continue
        if body.name in seen:
            problems.append(f"{path}: agent {body.name!r} is also defined in {seen[body.name]}")
            continue
        seen[body.name] = path
        files.append(DefinitionFile(path, body))
    if problems:
        raise CommandFailed(problems, EXIT_USAGE)
    return files


def _definition(path: Path) -> "AgentCreate":
    from pydantic import ValidationError

    from app.api.agents.schemas import AgentCreate
    from app.api.inputs import parse_json_body
    from app.resources.agents import DEFAULT_AGENT

    try:
        document = yaml.load(path.read_text(encoding="utf-8"), Loader=_JSONLoader)
    except UnicodeDecodeError as exc:
        raise CommandFailed([f"{path}: not UTF-8 (byte {exc.start})"]) from None
    except OSError as exc:
        raise CommandFailed([f"{path}: cannot be read: {exc.strerror}"]) from None
    except yaml.YAMLError as exc:
        raise CommandFailed([f"{path}: not valid YAML: {_yaml_problem(exc)}"]) from None
    if not isinstance(document, dict):
        raise CommandFailed([f"{path}: must be a mapping of an agent's fields (name, ...)"])
    if (not_json := _not_json(document, ())) is not None:
        raise CommandFailed([f"{path}: {not_json}"])
    # What the API refuses in any body: text no database stores.
    _, problem = parse_json_body(json.dumps(document).encode())
    if problem is not None:
        where = problem.field.removeprefix("body").removeprefix(".") or "(file)"
        raise CommandFailed([f"{path}: {where}: {problem.message}"])
    try:
        body = AgentCreate.model_validate(document)
    except ValidationError as exc:
        raise CommandFailed(
            [f"{path}: {_where(error['loc'])}: {error['msg']}" for error in exc.errors()]
        ) from None
    if body.name == DEFAULT_AGENT:
        raise CommandFailed([f"{path}: name: {DEFAULT_AGENT!r} is the built-in agent's name"])
    return body


class _JSONLoader(yaml.SafeLoader):
    """YAML read as the JSON a definition is: a date stays the text it is written as (JSON
    has no dates)."""


_JSONLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _not_json(value: Any, loc: tuple[str, ...]) -> str | None:
    """Where and why a loaded document holds what JSON cannot (bytes, sets, explicit dates,
    NaN; nesting deeper than any body may, which an alias can make endless), or None."""
    from app.api.inputs import MAX_JSON_DEPTH

    where = ".".join(loc) or "(file)"
    if len(loc) > MAX_JSON_DEPTH:
        return f"{where}: nested deeper than {MAX_JSON_DEPTH} levels"
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where}: the key {key!r} is not text"
            if (problem := _not_json(item, (*loc, key))) is not None:
                return problem
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if (problem := _not_json(item, (*loc, str(index)))) is not None:
                return problem
    elif isinstance(value, float) and not math.isfinite(value):
        return f"{where}: {value} is not a JSON number"
    elif value is not None and not isinstance(value, str | int | float | bool):
        return f"{where}: not a JSON value ({type(value).__name__})"
    return None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return " ".join(str(problem).split())
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"


def _where(loc: Iterable[int | str]) -> str:
    return ".".join(str(part) for part in loc) or "(file)"


# In-process, on the configured database.


async def _apply_locally(
    settings: "Settings", tenant_id: str, files: list[DefinitionFile]
) -> list[str]:
    """Applies every file in one transaction: all of them, or (on any refusal) none."""
    from pydantic import ValidationError

    from app.agents import AgentRuntime, RuntimeSettings
    from app.cli.configuration import models_hint
    from app.llm import ModelConfigError
    from app.resources.agents import AgentArchived, AgentService, InvalidDefinition
    from app.runs.agents import RunnableDefinitions, check_definition

    try:
        runtime = AgentRuntime.build(RuntimeSettings.model_validate(settings))
    except (ValidationError, ModelConfigError) as exc:
        problem = " ".join(str(exc).split())
        raise CommandFailed([f"configuration error: {problem}"], EXIT_USAGE) from None
    async with _tenant_database(settings, tenant_id) as (database, tenant):
        caller = _operator(tenant)
        problems: list[str] = []
        for file in files:
            try:
                check_definition(runtime, tenant, file.body.definition(), name=file.body.name)
            except InvalidDefinition as exc:
                problems.extend(_problem_lines(file.path, str(exc), exc.problems))
        if problems:
            if any("unknown model" in problem for problem in problems):
                problems.append(models_hint(settings, "apply there with --server URL --token T"))
            raise CommandFailed(problems, EXIT_USAGE)
        agents = AgentService(database, RunnableDefinitions(runtime))
        try:
            applied = await agents.apply(
                caller, [(file.body.name, file.body.fields()) for file in files]
            )
        except AgentArchived as exc:
            raise CommandFailed([f"{exc}; nothing was applied"]) from None
        except InvalidDefinition as exc:
            raise CommandFailed(_problem_lines(None, str(exc), exc.problems)) from None
        return [_applied_line(record.name, how, record.version) for how, record in applied]


async def _list_locally(settings: "Settings", tenant_id: str, *, archived: bool) -> list[str]:
    from app.api.agents.schemas import AgentOut
    from app.resources.agents.store import AgentRepository

    async with (
        _tenant_database(settings, tenant_id) as (database, tenant),
        database.read() as connection,
    ):
        records = await AgentRepository(connection, tenant.id).page(
            after=None, limit=100_000, archived=archived
        )
    agents = [AgentOut.builtin_of(since=tenant.record.created_at), *map(AgentOut.of, records)]
    return [_listed_line(agent) for agent in agents]


@asynccontextmanager
async def _tenant_database(
    settings: "Settings", tenant_id: str
) -> "AsyncIterator[tuple[Database, Tenant]]":
    """The configured database (migrated first, like every in-process command) and the
    tenant the command acts in, which must exist and be active."""
    from app.governance.tenants import command_tenant
    from app.storage import Database

    database = Database(settings.resolved_database_url())
    try:
        tenant = await command_tenant(
            database, tenant_id, development=settings.env == "development"
        )
        if tenant is None or not tenant.is_active:
            state = "no" if tenant is None else "a disabled"
            raise CommandFailed([f"{state} tenant {tenant_id!r} (see `omniforge tenant`)"])
        yield database, tenant
    finally:
        await database.dispose()


def _operator(tenant: "Tenant") -> "Caller":
    """Whoever runs the command on the service's own machine acts as the tenant's admin."""
    from app.governance.callers import Caller
    from app.security import Principal
    from app.security.rbac import Role, permissions_of

    roles = frozenset({Role.TENANT_ADMIN.value})
    principal = Principal(subject=f"cli:{getpass.getuser()}", tenant_id=tenant.id, roles=roles)
    return Caller(principal, tenant, permissions_of(roles))


# Through a running service.


def _apply_remotely(server: str, token: str, files: list[DefinitionFile]) -> list[str]:
    """Applies the files one by one; the first refusal stops there (the files before it stay
    applied, and are reported as such)."""
    lines: list[str] = []
    with _client(server, token) as client:
        for file in files:
            try:
                lines.append(_apply_one(client, file))
            except CommandFailed as exc:
                raise CommandFailed(exc.lines, exc.status, done=lines) from None
    return lines


def _apply_one(client: "httpx.Client", file: DefinitionFile) -> str:
    body = file.body
    current = _call(client, "GET", f"/api/v1/agents/{body.name}", file, ok=(200, 404))
    if current.status_code == 404:
        created = _call(client, "POST", "/api/v1/agents", file, json=_json(body))
        return _applied_line(body.name, "created", created.json()["version"])
    definition = _json(body.definition())
    patched = _call(client, "PATCH", f"/api/v1/agents/{body.name}", file, json=definition)
    version = patched.json()["version"]
    return _applied_line(
        body.name, "updated" if version != current.json()["version"] else "unchanged", version
    )


def _list_remotely(server: str, token: str, *, archived: bool) -> list[str]:
    from app.api.agents.schemas import AgentOut

    lines: list[str] = []
    params: dict[str, Any] = {"limit": 200, "archived": "true" if archived else "false"}
    with _client(server, token) as client:
        while True:
            page = _call(client, "GET", "/api/v1/agents", None, params=params).json()
            lines.extend(_listed_line(AgentOut.model_validate(item)) for item in page["items"])
            if page["next_cursor"] is None:
                return lines
            params["cursor"] = page["next_cursor"]


def _client(server: str, token: str) -> "httpx.Client":
    import httpx

    return httpx.Client(
        base_url=server.rstrip("/"), headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def _call(
    client: "httpx.Client",
    method: str,
    url: str,
    file: DefinitionFile | None,
    *,
    ok: tuple[int, ...] = (200, 201),
    **kwargs: Any,
) -> "httpx.Response":
    import httpx

    try:
        response = client.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        raise CommandFailed([f"cannot reach {client.base_url}: {exc}"]) from None
    if response.status_code in ok:
        return response
    path = None if file is None else file.path
    try:
        problem = response.json()
        lines = _problem_lines(path, problem["detail"], problem.get("errors"))
    except (ValueError, KeyError, TypeError):
        lines = [f"{method} {url}: HTTP {response.status_code}"]
    raise CommandFailed(lines, EXIT_USAGE if response.status_code == 422 else EXIT_FAILED)


def _json(model: Any) -> Any:
    """A body as JSON: every field, defaults included, so that what the file leaves unset
    is reset on the server too."""
    return model.model_dump(mode="json")


# Output.


def _applied_line(name: str, applied: str, version: int) -> str:
    if applied == "updated":
        return f"{name}: updated to v{version}"
    return f"{name}: {applied} (v{version})"


def _listed_line(agent: "AgentOut") -> str:
    status = f"{agent.status}{', built-in' if agent.builtin else ''}"
    return f"{agent.name}\tv{agent.latest_version}\t{status}\t{agent.description or ''}"


def _problem_lines(path: Path | None, detail: str, errors: Iterable[Any] | None) -> list[str]:
    """A refusal as lines: one per field problem (the field as named in the file), else its
    detail."""
    prefix = "" if path is None else f"{path}: "
    lines = []
    for error in errors or []:
        field = error["field"] if isinstance(error, dict) else error.field
        message = error["message"] if isinstance(error, dict) else error.message
        lines.append(f"{prefix}{field.removeprefix('body.')}: {message}")
    return lines or [f"{prefix}{detail}"]
