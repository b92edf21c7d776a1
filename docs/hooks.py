"""MkDocs build hook: the reference tables that the code already states, generated from it at
build time so that they cannot drift from it.

A page asks for a table with a marker on a line of its own:

- `<!-- omniforge:settings -->`: every setting of `app.config.Settings` (its environment
  variable, type, default and description);
- `<!-- omniforge:problems -->`: every problem type an API answer can carry (from
  `app.errors.problem_catalogue()`, or, where that does not exist, from the `ProblemType`
  constants of the API's error modules);
- `<!-- omniforge:roles -->`: which permissions each role grants (`app.security.rbac`);
- `<!-- omniforge:cli -->`: `omniforge --help` and each command's help (`app.cli`);
- `<!-- omniforge:chain-error-codes -->` checks, rather than writes, the hand-written table
  of chain error codes that follows it: every `ErrorCode` must have a row.

Something the code cannot say (a setting without a description) is a warning, which
`mkdocs build --strict` turns into a failed build.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import get_plugin_logger
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

log = get_plugin_logger("omniforge")

MARKER = re.compile(r"^<!-- omniforge:(?P<name>[a-z-]+) -->$", re.MULTILINE)
ENV_PREFIX = "OMNIFORGE_"
# Headings of the settings' sections, by class name (`RunSettings` → `Run`); a section not
# listed is headed by its class name.
SECTION_TITLES = {
    "Auth": "Authentication",
    "Api": "API",
    "Run": "Runs",
    "Agent": "Agents",
    "Tool": "Tools",
    "Webhook": "Webhooks",
}


class Problem(Protocol):
    """A problem type as the catalogue lists it."""

    @property
    def slug(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def status(self) -> int: ...
    @property
    def uri(self) -> str: ...


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    def expand(match: re.Match[str]) -> str:
        name = match.group("name")
        render = TABLES.get(name)
        if render is None:
            log.warning("%s: no generated table is called %r", page.file.src_uri, name)
            return match.group(0)
        return render(markdown[match.end() :], page.file.src_uri)

    return MARKER.sub(expand, markdown)


# Settings ---------------------------------------------------------------------------------


def settings_table(_rest: str, where: str) -> str:
    """One table per section of the settings (the class that declares each field), in the
    order the fields are declared."""
    from app.config import Settings

    sections: dict[type, list[str]] = {}
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        variable = alias if isinstance(alias, str) else ENV_PREFIX + name.upper()
        description = field.description or ""
        if not description:
            log.warning("%s: setting %s has no description", where, variable)
        default = (
            field.default_factory()  # type: ignore[call-arg]
            if field.default_factory is not None
            else field.default
        )
        kind = _type_name(field.annotation)
        if typing.get_origin(field.annotation) is list and not _comma_separated(field.metadata):
            # pydantic-settings reads a list variable as JSON unless it is marked NoDecode.
            kind = kind.replace("comma-separated list", "JSON list", 1)
            shown = f"`{json.dumps(default)}`"
        else:
            shown = _default_text(default)
        cells = [
            f"`{variable}`",
            _cell(kind + _bounds(field.metadata)),
            _cell(shown),
            _cell(" ".join(description.split())),
        ]
        sections.setdefault(_declared_by(Settings, name), []).append(
            "| " + " | ".join(cells) + " |"
        )
    parts: list[str] = []
    for section, rows in sections.items():
        if len(sections) > 1:
            name = section.__name__.removesuffix("Settings") or section.__name__
            title = SECTION_TITLES.get(name, name)
            parts += [f"## {title}", ""]
            doc = " ".join((section.__doc__ or "").split())
            if doc:
                parts += [doc, ""]
        parts += ["| variable | type | default | description |", "|---|---|---|---|", *rows, ""]
    return "\n".join(parts)


def _declared_by(settings: type, name: str) -> type:
    """The class of the settings' hierarchy whose own body declares the field `name`."""
    for cls in settings.__mro__:
        if name in vars(cls).get("__annotations__", {}):
            return cls
    return settings


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(arguments[0])
    if origin in (typing.Union, types.UnionType):
        named = [_type_name(a) for a in arguments if a is not type(None)]
        optional = len(named) < len(arguments)
        return " or ".join(named) + (", optional" if optional else "")
    if origin is typing.Literal:
        return " or ".join(f"`{value}`" for value in arguments)
    if origin is list:
        inner = _type_name(arguments[0]) if arguments else "text"
        return f"comma-separated list of {inner}"
    names = {
        str: "text",
        int: "integer",
        float: "number",
        bool: "`true` or `false`",
        Path: "path",
    }
    if annotation in names:
        return names[annotation]
    if getattr(annotation, "__name__", "") == "SecretStr":
        return "secret text"
    return getattr(annotation, "__name__", str(annotation))


def _comma_separated(metadata: Iterable[Any]) -> bool:
    """Whether the setting's variable is read as `a,b,c` (marked `NoDecode`), not as JSON."""
    from pydantic_settings import NoDecode

    return any(item is NoDecode or isinstance(item, NoDecode) for item in metadata)


def _bounds(metadata: Iterable[Any]) -> str:
    """The numeric bounds pydantic keeps as metadata (`ge=1, le=200` → `, 1 to 200`)."""
    found: dict[str, Any] = {}
    for item in metadata:
        for bound in ("ge", "gt", "le", "lt"):
            value = getattr(item, bound, None)
            if value is not None:
                found[bound] = value
    low = f"≥ {found['ge']}" if "ge" in found else f"> {found['gt']}" if "gt" in found else None
    high = f"≤ {found['le']}" if "le" in found else f"< {found['lt']}" if "lt" in found else None
    parts = [part for part in (low, high) if part]
    return f" ({', '.join(parts)})" if parts else ""


def _default_text(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list | tuple):
        return ", ".join(f"`{item}`" for item in value) if value else "none"
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


# Problem types ----------------------------------------------------------------------------


def problems_table(_rest: str, where: str) -> str:
    problems = _problem_catalogue()
    rows = ["| type | status | title | when |", "|---|---|---|---|"]
    for problem in problems:
        description = " ".join(str(getattr(problem, "description", "") or "").split())
        if not description:
            log.info("%s: problem type %s has no description yet", where, problem.slug)
        rows.append(
            f"| [`{problem.slug}`]({problem.uri}) | {problem.status} | {_cell(problem.title)} "
            f"| {_cell(description)} |"
        )
    return "\n".join(rows)


def _problem_catalogue() -> list[Problem]:
    """The catalogue the code keeps (`app.errors.problem_catalogue`); until it exists, the
    problem types the API's error modules declare, by status."""
    try:
        catalogue: Callable[[], Iterable[Problem]] = importlib.import_module(
            "app.errors"
        ).problem_catalogue
    except (ImportError, AttributeError):
        pass
    else:
        return list(catalogue())
    found: dict[str, Problem] = {}
    for module_name in ("app.api.errors", "app.api.openai_compat.errors"):
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if type(value).__name__ == "ProblemType" and hasattr(value, "slug"):
                found.setdefault(value.slug, value)
    return sorted(found.values(), key=lambda problem: (problem.status, problem.slug))


# Roles ------------------------------------------------------------------------------------


def roles_table(_rest: str, _where: str) -> str:
    from app.security.rbac import ROLE_PERMISSIONS, Permission, Role

    roles = list(Role)
    rows = [
        "| permission | " + " | ".join(f"`{role.value}`" for role in roles) + " |",
        "|---|" + "---|" * len(roles),
    ]
    for permission in Permission:
        marks = ["✓" if permission in ROLE_PERMISSIONS[role] else "" for role in roles]
        rows.append(f"| `{permission.value}` | " + " | ".join(marks) + " |")
    return "\n".join(rows)


# The command line ---------------------------------------------------------------------------


def cli_reference(_rest: str, _where: str) -> str:
    """`omniforge --help`, then each command's own help, as the installed parser prints them."""
    from app.cli import _parser

    sections = ["```text", _help(_parser()).rstrip(), "```"]
    for name, parser, summary in _commands(_parser()):
        sections += ["", f"### `{name}`", "", f"{summary[:1].upper()}{summary[1:]}."]
        sections += ["", "```text", _help(parser).rstrip(), "```"]
    return "\n".join(sections)


def _commands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        summaries = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, command in action.choices.items():
            yield command.prog, command, summaries.get(name, "")
            yield from _commands(command)


def _help(parser: argparse.ArgumentParser) -> str:
    """The parser's help at a fixed width, whatever the terminal building the site."""
    parser.formatter_class = functools.partial(argparse.HelpFormatter, width=96)
    return parser.format_help()


# Chain error codes ------------------------------------------------------------------------


def chain_error_codes_check(rest: str, where: str) -> str:
    from app.chain import ErrorCode

    table: list[str] = []
    for line in rest.lstrip("\n").splitlines():
        if not line.startswith("|"):
            break
        table.append(line)
    listed = set(re.findall(r"^\| `([a-z_]+)` \|", "\n".join(table), re.MULTILINE))
    for code in ErrorCode:
        if code.value not in listed:
            log.warning("%s: the error code table lacks `%s`", where, code.value)
    for code in listed - {code.value for code in ErrorCode}:
        log.warning("%s: the error code table lists `%s`, which is no error code", where, code)
    return ""


def _cell(text: str) -> str:
    """Text for a table cell: pipes escaped, but not inside code spans, where the table
    extension already leaves them alone (and would show the backslash)."""
    parts = re.split(r"(`[^`]*`)", text.replace("\n", " "))
    return "".join(p if p.startswith("`") else p.replace("|", "\\|") for p in parts)


TABLES: dict[str, Callable[[str, str], str]] = {
    "settings": settings_table,
    "problems": problems_table,
    "roles": roles_table,
    "chain-error-codes": chain_error_codes_check,
    "cli": cli_reference,
}
