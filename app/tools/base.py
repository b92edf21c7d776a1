"""The tool interface: a definition plus `execute`. Everything else is composed around it."""

import string
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from app.chain import ToolResultInfo
from app.tools.models import CallEstimate, ToolCallContext, ToolDefinition, ToolOutput


class BaseTool(ABC):
    """A tool. `definition` must not change after the tool is registered.

    `execute` returns a `ToolOutput` or raises a `ToolError` saying how it failed; the
    executor validates arguments against the schema before calling it, and handles timeouts,
    retries, guards, recording and truncation.
    """

    @property
    @abstractmethod
    def definition(self) -> ToolDefinition: ...

    @abstractmethod
    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput: ...

    async def estimate(
        self, arguments: dict[str, Any], context: ToolCallContext
    ) -> CallEstimate | None:
        """What the call will likely consume; None when the tool cannot tell (most tools)."""
        return None

    def summarize(self, result: ToolResultInfo) -> str:
        """A one-line, human-readable account of a result for `summary` visibility."""
        definition = self.definition
        if not result.success:
            return f"{definition.name} failed: {result.error_code or 'error'}"
        template = definition.visibility.summary_template
        if template is None:
            return f"{definition.name} succeeded"
        fields: dict[str, Any] = result.model_dump(exclude={"result"})
        if isinstance(result.result, Mapping):
            fields.update(result.result)
        else:
            fields["result"] = result.result
        return _SafeFormatter().format(template, **fields)


class _SafeFormatter(string.Formatter):
    """Formats a summary template; a missing field shows as '?' instead of failing."""

    def get_value(self, key: int | str, args: Any, kwargs: Mapping[str, Any]) -> Any:
        if isinstance(key, str):
            return kwargs.get(key, "?")
        return super().get_value(key, args, kwargs)

    def format_field(self, value: Any, format_spec: str) -> str:
        try:
            return str(super().format_field(value, format_spec))
        except (TypeError, ValueError):
            return str(value)
