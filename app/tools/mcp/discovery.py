"""What an MCP server's `tools/list` becomes: each tool checked (`discover`), then named as runs
know it, `<server>__<tool>` (`named`). Tools that cannot be offered are skipped, each with
its reason. Names are derived, not stored, so that renaming a server renames its tools."""

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.tools.schemas import SchemaRefused, applied_validator

SEPARATOR = "__"
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_REMOTE_NAME_CHARS = 128
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True, slots=True)
class McpToolSpec:
    """One tool a server offers: `remote` is the server's name for it, `parameters` its input
    JSON Schema (an object schema), `idempotent` whether its annotations say a call may be
    made again, `egress` whether a call may carry data out (`_egress`)."""

    remote: str
    description: str
    parameters: dict[str, Any]
    idempotent: bool = False
    egress: bool = True

    def document(self) -> dict[str, Any]:
        return {
            "remote": self.remote,
            "description": self.description,
            "parameters": self.parameters,
            "idempotent": self.idempotent,
            "egress": self.egress,
        }

    @classmethod
    def of(cls, document: dict[str, Any]) -> "McpToolSpec":
        # Documents stored before servers' annotations were read hold no `idempotent` (nor,
        # before their egress was, `egress`: such a tool may carry data out).
        return cls(
            document["remote"],
            document["description"],
            document["parameters"],
            document.get("idempotent") is True,
            document.get("egress") is not False,
        )


@dataclass(frozen=True, slots=True)
class Discovery:
    """The tools a listing offers, and the others: (the server's name for it, why skipped)."""

    tools: list[McpToolSpec]
    skipped: list[tuple[str, str]]


def discover(server: str, listed: Iterable[Mapping[str, Any]]) -> Discovery:
    """The tools of `server`'s listing (as it sent them) that can be offered: skipped are a
    tool without a name, one listed twice, and one whose `inputSchema` is not a JSON Schema
    of an object. Each is `idempotent` when its annotations say so (`_idempotent`)."""
    tools: list[McpToolSpec] = []
    skipped: list[tuple[str, str]] = []
    seen: set[str] = set()
    for tool in listed:
        name = tool.get("name")
        if not isinstance(name, str) or not name.strip():
            skipped.append((str(name)[:MAX_REMOTE_NAME_CHARS], "it has no name"))
            continue
        if len(name) > MAX_REMOTE_NAME_CHARS:
            skipped.append((name[:MAX_REMOTE_NAME_CHARS] + "…", "its name is too long"))
            continue
        if name in seen:
            skipped.append((name, "listed twice"))
            continue
        seen.add(name)
        schema = tool.get("inputSchema")
        problem = schema_problem(schema)
        if problem is not None:
            skipped.append((name, problem))
            continue
        assert isinstance(schema, dict)
        description = _text(tool.get("description")) or _text(tool.get("title"))
        description = description or f"{name} (MCP server {server})"
        spec = McpToolSpec(
            name, description[:MAX_DESCRIPTION_CHARS], schema, _idempotent(tool), _egress(tool)
        )
        tools.append(spec)
    return Discovery(tools, skipped)


def _idempotent(tool: Mapping[str, Any]) -> bool:
    """Whether a listed tool may be called again when a first call's outcome is unknown: its
    annotations (MCP `ToolAnnotations`) say so (`idempotentHint`) or say it changes nothing
    (`readOnlyHint`). Hints a server leaves out, or sends as anything but `true`, say no."""
    annotations = tool.get("annotations")
    if not isinstance(annotations, Mapping):
        return False
    return annotations.get("idempotentHint") is True or annotations.get("readOnlyHint") is True


def _egress(tool: Mapping[str, Any]) -> bool:
    """Whether a call may carry data out of the service: unless its annotations say that it
    changes nothing (`readOnlyHint`) *and* that it deals with no open world of outside
    entities (`openWorldHint: false`; MCP's default is true). A read-only tool of the open
    world still sends its arguments there (a search query, say)."""
    annotations = tool.get("annotations")
    if not isinstance(annotations, Mapping):
        return True
    return not (
        annotations.get("readOnlyHint") is True and annotations.get("openWorldHint") is False
    )


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def tool_name(server: str, remote: str) -> str | None:
    """`<server>__<tool>` with the tool's name made safe (`[A-Za-z0-9_-]`) and cut so that the
    whole fits in 64 characters; None when nothing of the tool's name is left."""
    room = MAX_NAME_CHARS - len(server) - len(SEPARATOR)
    safe = _UNSAFE.sub("_", remote).strip("_")[:room]
    return f"{server}{SEPARATOR}{safe}" if safe else None


def named(
    server: str, specs: Sequence[McpToolSpec]
) -> tuple[list[tuple[str, McpToolSpec]], list[tuple[str, str]]]:
    """Each tool with its name for runs, and the tools that get none: one whose name has no
    safe character, and every tool of a group whose names become the same (none of them
    would be unambiguous)."""
    candidates: list[tuple[str, McpToolSpec]] = []
    skipped: list[tuple[str, str]] = []
    for spec in specs:
        name = tool_name(server, spec.remote)
        if name is None:
            skipped.append((spec.remote, "its name has no character a tool name may hold"))
        else:
            candidates.append((name, spec))
    counts = Counter(name for name, _ in candidates)
    tools: list[tuple[str, McpToolSpec]] = []
    for name, spec in candidates:
        if counts[name] == 1:
            tools.append((name, spec))
            continue
        others = ", ".join(
            repr(other.remote) for n, other in candidates if n == name and other is not spec
        )
        skipped.append((spec.remote, f"its name {name!r} would also be that of {others}"))
    return tools, skipped


def schema_problem(schema: Any) -> str | None:
    """Why `schema` cannot be a tool's parameters, or None."""
    if not isinstance(schema, dict):
        return "its inputSchema is not a JSON object"
    if schema.get("type") != "object":
        return "its inputSchema is not of type 'object'"
    try:
        applied_validator(schema)
    except SchemaRefused as exc:
        return f"its inputSchema is {exc}"
    return None
