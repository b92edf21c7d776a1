"""The set of tools a runtime offers, with each tool's compiled argument validator."""

from collections.abc import Iterable
from dataclasses import dataclass

from jsonschema.protocols import Validator

from app.chain import ToolType
from app.tools.base import BaseTool
from app.tools.errors import ToolAlreadyRegisteredError, ToolNotFoundError
from app.tools.models import ToolDefinition
from app.tools.schemas import has_patterns
from app.tools.validation import compile_validator


@dataclass(frozen=True, slots=True)
class RegisteredTool:
    tool: BaseTool
    definition: ToolDefinition
    validator: Validator
    # Arguments are checked off the event loop when the schema has patterns.
    patterned: bool = False
    # Offered only to runs that name it (their task's, agent's or tenant's tools), never to
    # a run offered every tool: the sandbox tools.
    on_request: bool = False

    @classmethod
    def of(cls, tool: BaseTool, *, on_request: bool = False) -> "RegisteredTool":
        definition = tool.definition
        parameters = definition.parameters
        return cls(
            tool,
            definition,
            compile_validator(parameters),
            has_patterns(parameters),
            on_request,
        )


class ToolRegistry:
    """Tools by name. Built at start-up and passed explicitly; there is no global registry."""

    def __init__(self, tools: list[BaseTool] | None = None) -> None:
        self._entries: dict[str, RegisteredTool] = {}
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: BaseTool, *, replace: bool = False, on_request: bool = False) -> None:
        """Adds a tool; `on_request`: offered only to runs that name it."""
        definition = tool.definition
        if definition.name in self._entries and not replace:
            raise ToolAlreadyRegisteredError(definition.name)
        self._entries[definition.name] = RegisteredTool.of(tool, on_request=on_request)

    def extended(self, entries: Iterable[RegisteredTool]) -> "ToolRegistry":
        """This registry with `entries` added (a tenant's own tools, for one run); a name this
        registry has keeps its tool."""
        extended = ToolRegistry()
        extended._entries = dict(self._entries)
        for entry in entries:
            extended._entries.setdefault(entry.definition.name, entry)
        return extended

    def unregister(self, name: str) -> None:
        if self._entries.pop(name, None) is None:
            raise ToolNotFoundError(name)

    def entry(self, name: str) -> RegisteredTool:
        try:
            return self._entries[name]
        except KeyError:
            raise ToolNotFoundError(name) from None

    def get(self, name: str) -> BaseTool:
        return self.entry(name).tool

    def definition(self, name: str) -> ToolDefinition:
        return self.entry(name).definition

    def idempotent(self, name: str) -> bool:
        """Whether a call of `name` may be made again when its outcome is unknown: LLM calls
        and tools that declare it; an unknown tool is not."""
        if name not in self:
            return False
        definition = self.definition(name)
        return definition.type is ToolType.LLM or definition.idempotent

    def has(self, name: str) -> bool:
        return name in self._entries

    def offered(self, name: str, allowed: frozenset[str] | None) -> bool:
        """Whether a run whose tools are `allowed` (None: every tool) has `name`: a tool it
        names, or with none named, any tool but those offered only on request."""
        entry = self._entries.get(name)
        if entry is None:
            return False
        return name in allowed if allowed is not None else not entry.on_request

    def names(self) -> list[str]:
        return list(self._entries)

    def list_tools(self, tool_type: ToolType | None = None) -> list[ToolDefinition]:
        return [
            entry.definition
            for entry in self._entries.values()
            if tool_type is None or entry.definition.type is tool_type
        ]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)
