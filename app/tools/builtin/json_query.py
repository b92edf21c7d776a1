"""The json_query skill: JSONPath (jsonpath-ng's extended syntax) over a JSON document.

A model writes the query and often the document, so the evaluation is bounded: the document's
size and depth are capped, syntax whose cost escapes those caps is refused (regular
expressions, which can backtrack without end inside one C call; `*` on strings and lists, which
can allocate gigabytes in one; the deprecated `|` and `&`, whose precedence makes `$..a | $..b`
quadratic), and what is left runs off the event loop under a CPU-time budget.
"""

import asyncio
import json
import math
import sys
import time
import warnings
from collections.abc import Callable
from types import FrameType
from typing import Any

from jsonpath_ng import JSONPath
from jsonpath_ng.ext.arithmetic import Operation
from jsonpath_ng.ext.filter import Expression
from jsonpath_ng.ext.parser import parse
from jsonpath_ng.ext.string import Sub

from app.chain import ToolType
from app.errors import OmniForgeError
from app.tools.base import BaseTool
from app.tools.errors import FieldError, InvalidToolArguments, ToolError
from app.tools.models import (
    NO_RETRY,
    ToolCallContext,
    ToolDefinition,
    ToolOutput,
    ToolVisibilityConfig,
)

TOOL_NAME = "json_query"
MAX_DOCUMENT_BYTES = 1_000_000
MAX_QUERY_CHARS = 1_000
MAX_DEPTH = 64
MAX_RESULTS = 1_000
DEFAULT_CPU_BUDGET_S = 5.0
CACHE_TTL_S = 300
# Integers a query's arithmetic makes stay printable (Python refuses to print past 4,300 digits).
_MAX_INT_BITS = 12_000
# How often (in profiler events) the budget is checked: reading the clock each time would
# double the cost of the profiler itself.
_BUDGET_CHECK_EVERY = 4_096


def _definition() -> ToolDefinition:
    return ToolDefinition(
        name=TOOL_NAME,
        type=ToolType.SKILL,
        description=(
            "Queries a JSON document with JSONPath and returns every matching value, in "
            "document order. Examples: '$.store.book[*].author', '$..price', "
            "'$.items[?(@.price < 10)].name', '$.items[?(@.tags[*] == \"new\")]', "
            "'$.items[0:3]', \"$['a','b']\", '$.items.`len`', '$.items[/price][*].name' (sorted by "
            "price). "
            f"Quote strings in filters. Regular expressions ('=~', sub()), the '|' and '&' "
            f"operators and '*' on text are not supported. The document is at most "
            f"{MAX_DOCUMENT_BYTES:,} bytes of JSON, nested at most {MAX_DEPTH} levels; at most "
            f"{MAX_RESULTS:,} results are returned."
        ),
        parameters={
            "type": "object",
            "properties": {
                "data": {
                    "type": ["object", "array", "string"],
                    "maxLength": MAX_DOCUMENT_BYTES,
                    "description": "The JSON document: an object or array, or its JSON text.",
                },
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUERY_CHARS,
                    "description": "A JSONPath expression starting at the root '$'.",
                },
                "include_paths": {
                    "type": "boolean",
                    "default": False,
                    "description": "Also return where each result was found.",
                },
            },
            "required": ["data", "query"],
            "additionalProperties": False,
        },
        returns_description="An object with `results` (the matching values), `count`, "
        "`paths` when asked for, and `truncated` when more than the limit matched.",
        timeout_s=15,
        retry=NO_RETRY,
        idempotent=True,
        cache_ttl_seconds=CACHE_TTL_S,
        visibility=ToolVisibilityConfig(summary_template="{query}: {count} result(s)"),
    )


class JsonQueryTool(BaseTool):
    """JSONPath queries over documents the caller passes in; `cpu_budget_s` bounds the CPU
    time one query may take."""

    def __init__(self, *, cpu_budget_s: float = DEFAULT_CPU_BUDGET_S) -> None:
        self._cpu_budget_s = cpu_budget_s
        self._definition = _definition()

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        query: str = arguments["query"]
        path = compile_query(query)
        # Parsing a megabyte and walking it takes tens of milliseconds: off the event loop.
        value = await asyncio.to_thread(
            self._run, path, arguments["data"], bool(arguments.get("include_paths"))
        )
        return ToolOutput({"query": query, **value})

    def _run(self, path: JSONPath, data: Any, include_paths: bool) -> dict[str, Any]:
        document = load_document(data)
        matches = _within_budget(lambda: path.find(document), self._cpu_budget_s)
        shown = matches[:MAX_RESULTS]
        value: dict[str, Any] = {"count": len(matches), "results": [m.value for m in shown]}
        if include_paths:
            value["paths"] = [str(m.full_path) for m in shown]
        if len(matches) > MAX_RESULTS:
            value["truncated"] = True
        return value


def compile_query(query: str) -> JSONPath:
    """The parsed query, or `InvalidToolArguments` naming what is wrong with it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            path = parse(query)
        except Exception as exc:  # the lexer and parser raise several kinds
            raise _invalid("query", f"is not valid JSONPath: {_reason(exc)}") from None
    if caught:  # deprecated syntax (union, intersection, unquoted words)
        raise _invalid("query", f"uses unsupported syntax: {caught[0].message}")
    _check_nodes(path)
    return path


def load_document(data: Any) -> Any:
    """The document `data` holds: itself, or the JSON text it is, within the size and depth
    caps."""
    if isinstance(data, str):
        if len(data.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_BYTES:
            raise _too_large()
        try:
            document = json.loads(data, parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            raise _invalid("data", f"is not valid JSON text: {exc}") from None
        except (RecursionError, ValueError) as exc:  # deep nesting, huge integers
            raise _invalid("data", f"cannot be read as JSON: {_reason(exc)}") from None
    else:
        document = data
        try:
            text = json.dumps(document, ensure_ascii=False, allow_nan=False)
            size = len(text.encode("utf-8", "surrogatepass"))
        except (RecursionError, ValueError) as exc:
            raise _invalid("data", f"cannot be read as JSON: {_reason(exc)}") from None
        if size > MAX_DOCUMENT_BYTES:
            raise _too_large()
    if _depth(document) > MAX_DEPTH:
        raise _invalid("data", f"is nested more than {MAX_DEPTH} levels deep")
    return document


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _depth(document: Any) -> int:
    """How deep `document` nests, counted up to one past the cap."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                break
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _check_nodes(path: JSONPath) -> None:
    """Refuses what one C call could spend without bound on, and makes `*` numeric."""
    stack: list[Any] = [path]
    while stack:
        node = stack.pop()
        if isinstance(node, list | tuple):
            stack.extend(node)
            continue
        if not isinstance(node, JSONPath):
            continue
        if isinstance(node, Sub) or (isinstance(node, Expression) and node.op == "=~"):
            raise _invalid(
                "query",
                "regular expressions (=~, sub()) are not supported; use text_transform's "
                "regex operations on the values instead",
            )
        if isinstance(node, Operation):
            node.op = _checked_operation(node.op_symbol, node.op)
        stack.extend(vars(node).values())


def _checked_operation(
    symbol: str, operation: Callable[[Any, Any], Any]
) -> Callable[[Any, Any], Any]:
    """Arithmetic that stays storable and bounded: `*` of numbers only (`"text" * 10**9`
    would allocate without bound), no infinities (JSON has none), no integer too long to
    print. A TypeError makes jsonpath-ng's operation match nothing, as for any operands it
    cannot combine."""

    def checked(left: Any, right: Any) -> Any:
        if symbol == "*" and not (_is_number(left) and _is_number(right)):
            raise TypeError("* multiplies numbers only")
        both_ints = isinstance(left, int) and isinstance(right, int)
        if both_ints and left.bit_length() + right.bit_length() > _MAX_INT_BITS:
            raise TypeError("the result is too large")
        result = operation(left, right)
        if isinstance(result, float) and not math.isfinite(result):
            raise TypeError("the result is not a finite number")
        return result

    return checked


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _OverBudget(OmniForgeError):
    pass


def _within_budget(work: Callable[[], list[Any]], budget_s: float) -> list[Any]:
    """`work()`, stopped once it has used `budget_s` of this thread's CPU time.

    A query's cost is not bounded by its document (a filter comparing every node with every
    other is quadratic), and a thread cannot be killed: a profiler on this thread raises
    inside the work instead (twice as slow, and only for the query).
    """
    deadline = time.thread_time() + budget_s
    events = 0

    def count(frame: FrameType, event: str, arg: object) -> None:
        nonlocal events
        events += 1
        if events % _BUDGET_CHECK_EVERY == 0 and time.thread_time() > deadline:
            raise _OverBudget

    previous = sys.getprofile()
    sys.setprofile(count)
    try:
        return work()
    except _OverBudget:
        raise ToolError(
            f"the query took more than {budget_s:g} s of CPU time; narrow it "
            "(fewer '..' segments, a narrower starting point)"
        ) from None
    except RecursionError:
        raise ToolError("the query recursed too deeply") from None
    except Exception as exc:  # the library's own failures on unexpected shapes
        raise ToolError(f"the query failed: {_reason(exc)}") from None
    finally:
        sys.setprofile(previous)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _too_large() -> InvalidToolArguments:
    return _invalid("data", f"is larger than {MAX_DOCUMENT_BYTES:,} bytes of JSON")


def _invalid(field: str, message: str) -> InvalidToolArguments:
    return InvalidToolArguments(TOOL_NAME, [FieldError(field, message)])
