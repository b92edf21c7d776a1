"""Tools every runtime offers: a calculator, the current time, the web (`web_fetch`,
`http_request`), files, JSONPath, text transforms and a task's todo list."""

from app.tools.base import BaseTool
from app.tools.builtin.calculator import CalculatorTool
from app.tools.builtin.current_time import CurrentTimeTool, resolve_timezone
from app.tools.builtin.files import ListFilesTool, ReadFileTool, SearchFilesTool
from app.tools.builtin.json_query import JsonQueryTool
from app.tools.builtin.text import TextTransformTool
from app.tools.builtin.todos import todo_tools
from app.tools.builtin.web import HttpRequestTool, WebFetchTool
from app.tools.net import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT_S, DEFAULT_USER_AGENT

__all__ = ["CalculatorTool", "CurrentTimeTool", "builtin_tools", "resolve_timezone"]


def builtin_tools(
    *,
    fetch_max_bytes: int = DEFAULT_MAX_BYTES,
    fetch_timeout_s: float = DEFAULT_TIMEOUT_S,
    fetch_user_agent: str = DEFAULT_USER_AGENT,
) -> list[BaseTool]:
    """Fresh instances of the built-in skills (the LLM tool is registered elsewhere); the
    HTTP tools with these limits."""
    return [
        CalculatorTool(),
        CurrentTimeTool(),
        ListFilesTool(),
        ReadFileTool(),
        SearchFilesTool(),
        WebFetchTool(
            max_bytes=fetch_max_bytes, timeout_s=fetch_timeout_s, user_agent=fetch_user_agent
        ),
        HttpRequestTool(
            max_bytes=fetch_max_bytes, timeout_s=fetch_timeout_s, user_agent=fetch_user_agent
        ),
        JsonQueryTool(),
        TextTransformTool(),
        *todo_tools(),
    ]
