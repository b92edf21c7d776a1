"""Tools every runtime offers: a calculator and the current time."""

from app.tools.base import BaseTool
from app.tools.builtin.calculator import CalculatorTool
from app.tools.builtin.current_time import CurrentTimeTool, resolve_timezone

__all__ = ["CalculatorTool", "CurrentTimeTool", "builtin_tools", "resolve_timezone"]


def builtin_tools() -> list[BaseTool]:
    """Fresh instances of the built-in skills (the LLM tool is registered elsewhere)."""
    return [CalculatorTool(), CurrentTimeTool()]
