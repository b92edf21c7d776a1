"""A tool plugin (`OMNIFORGE_TOOL_MODULES=tests.fakes.logging_tool`) that logs what it is
given, as careless code does: what the log of a run's own task looks like, and whether what
must never be logged is masked there."""

import logging
from typing import Any

from app.chain import ToolType
from app.tools.base import BaseTool
from app.tools.models import ToolCallContext, ToolDefinition, ToolOutput

logger = logging.getLogger(__name__)


class LogNote(BaseTool):
    _definition = ToolDefinition(
        name="log_note",
        type=ToolType.CUSTOM,
        description="Writes a note to the service's log.",
        parameters={
            "type": "object",
            "properties": {"note": {"type": "string"}},
            "required": ["note"],
        },
    )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        logger.warning("note from the agent: %s", arguments["note"])
        return ToolOutput({"logged": True})
