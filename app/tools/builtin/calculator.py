"""The calculator skill: evaluates arithmetic by walking a whitelisted AST, never `eval`."""

import ast
import math
import operator
from collections.abc import Callable
from typing import Any, NamedTuple

from app.chain import ToolType
from app.tools.base import BaseTool
from app.tools.errors import FieldError, InvalidToolArguments, ToolError
from app.tools.models import (
    NO_RETRY,
    ToolCallContext,
    ToolDefinition,
    ToolOutput,
    ToolVisibilityConfig,
)

Number = int | float

TOOL_NAME = "calculator"
MAX_EXPRESSION_CHARS = 500
MAX_NODES = 200
# Integers met while evaluating stay below ~10,000 digits; a returned one must also fit the
# interpreter's int-to-text limit (4,300 digits by default), or it could not be rendered.
MAX_INT_DIGITS = 10_000
MAX_RESULT_DIGITS = 4_000
MAX_FACTORIAL = 1_000
_MAX_INT_BITS = math.ceil(MAX_INT_DIGITS * math.log2(10))
_EXACT_FLOAT_LIMIT = 2**53
_FRIENDLY_OPERATORS = {"^": "**", "×": "*", "·": "*", "÷": "/", "−": "-"}


class _Function(NamedTuple):
    call: Callable[..., Any]
    min_args: int = 1
    max_args: int | None = 1  # None: any number


def _whole(name: str, value: Number) -> int:
    if isinstance(value, float):
        if not value.is_integer():
            raise ToolError(f"{name} needs whole numbers, not {_show(value)}")
        return int(value)
    return value


def _factorial(value: Number) -> int:
    n = _whole("factorial", value)
    if n < 0:
        raise ToolError(f"math domain error: factorial({n}) is undefined for negative numbers")
    if n > MAX_FACTORIAL:
        raise ToolError(f"factorial({_show(n)}) is too large; the limit is {MAX_FACTORIAL}")
    return math.factorial(n)


def _gcd(*values: Number) -> int:
    return math.gcd(*(_whole("gcd", v) for v in values))


def _lcm(*values: Number) -> int:
    whole = [_whole("lcm", v) for v in values]
    _check_bits(sum(abs(v).bit_length() for v in whole), "lcm(...)")
    return math.lcm(*whole)


def _round(value: Number, ndigits: Number | None = None) -> Number:
    if ndigits is None:
        return round(value)
    # Rounding an int to -n digits computes 10**n: clamp n so that stays cheap (past the
    # clamp the result no longer changes).
    return round(value, max(-(MAX_INT_DIGITS + 1), min(_whole("round", ndigits), 400)))


_MATH_UNARY = "sqrt cbrt exp log10 log2 sin cos tan asin acos atan sinh cosh tanh floor ceil trunc"
_FUNCTIONS: dict[str, _Function] = {
    **{name: _Function(getattr(math, name)) for name in _MATH_UNARY.split()},
    "log": _Function(math.log, 1, 2),
    "atan2": _Function(math.atan2, 2, 2),
    "abs": _Function(abs),
    "round": _Function(_round, 1, 2),
    "min": _Function(lambda *args: min(args), 1, None),
    "max": _Function(lambda *args: max(args), 1, None),
    "factorial": _Function(_factorial),
    "gcd": _Function(_gcd, 1, None),
    "lcm": _Function(_lcm, 1, None),
    "hypot": _Function(math.hypot, 1, None),
    "degrees": _Function(math.degrees),
    "radians": _Function(math.radians),
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}
_SYMBOLS: dict[type[ast.AST], str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.UAdd: "+", ast.USub: "-", ast.BitAnd: "&", ast.BitOr: "|",
    ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>", ast.MatMult: "@", ast.Invert: "~",
    ast.Not: "not",
}  # fmt: skip
_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
}  # fmt: skip
_UNARY: dict[str, Callable[[Any], Any]] = {"+": operator.pos, "-": operator.neg}
_UNSUPPORTED: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access ('.')", ast.Subscript: "indexing ('[...]')",
    ast.List: "lists", ast.Tuple: "tuples", ast.Set: "sets", ast.Dict: "dictionaries",
    ast.ListComp: "comprehensions", ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions", ast.GeneratorExp: "comprehensions",
    ast.Lambda: "lambda functions", ast.Compare: "comparisons", ast.BoolOp: "'and' / 'or'",
    ast.IfExp: "conditional expressions", ast.NamedExpr: "assignments (':=')",
    ast.JoinedStr: "strings", ast.Starred: "starred arguments",
}  # fmt: skip
_NAMES_HINT = f"{', '.join(_CONSTANTS)}, or a function: {', '.join(_FUNCTIONS)}"


def evaluate(expression: str) -> Number:
    """The value of an arithmetic expression, normalised as the tool returns it.

    Raises `InvalidToolArguments` when the expression is malformed or uses anything outside
    the whitelist, and `ToolError` when it is well-formed but has no representable value.
    """
    text = expression.strip()
    for friendly, python in _FRIENDLY_OPERATORS.items():
        text = text.replace(friendly, python)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        # A column only helps when the parsed text is the text the caller wrote.
        where = f" (at column {exc.offset})" if exc.offset and text == expression else ""
        raise _invalid(f"is not a valid arithmetic expression: {exc.msg}{where}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise _invalid(f"is not a valid arithmetic expression: {exc}") from None
    nodes = sum(isinstance(node, ast.expr) for node in ast.walk(tree))
    if nodes > MAX_NODES:
        raise _invalid(f"is too complex ({nodes} numbers and operations; the limit is {MAX_NODES})")
    try:
        return _normalise(_evaluate(tree.body))
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except OverflowError:
        raise ToolError("overflow: the result is too large to represent") from None


def _evaluate(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant):
        if type(node.value) is int:
            return node.value
        if type(node.value) is float:
            return _finite(node.value)
        raise _invalid(f"{_describe_constant(node.value)} cannot be used; use numbers only")
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if node.id in _FUNCTIONS:
            raise _invalid(f"{node.id} is a function; call it like {node.id}(...)")
        raise _invalid(f"name {node.id!r} is not supported; use one of: {_NAMES_HINT}")
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        symbol = _SYMBOLS.get(type(node.op), type(node.op).__name__)
        if isinstance(node, ast.UnaryOp) and symbol in _UNARY:
            return _UNARY[symbol](_evaluate(node.operand))  # type: ignore[no-any-return]
        if isinstance(node, ast.BinOp) and symbol in _BINARY:
            left, right = _evaluate(node.left), _evaluate(node.right)
            _guard_binary(symbol, left, right)
            return _checked(_BINARY[symbol](left, right))
        raise _invalid(f"the operator {symbol!r} is not supported")
    if isinstance(node, ast.Call):
        return _call(node)
    kind = _UNSUPPORTED.get(type(node), f"{type(node).__name__} expressions")
    raise _invalid(f"{kind} cannot be used; only numbers, operators and functions are allowed")


def _call(node: ast.Call) -> Number:
    if not isinstance(node.func, ast.Name):
        raise _invalid("only plain function names can be called, e.g. sqrt(2)")
    name = node.func.id
    function = _FUNCTIONS.get(name)
    if function is None:
        raise _invalid(f"function {name!r} is not supported; use one of: {_NAMES_HINT}")
    if node.keywords:
        raise _invalid(f"keyword arguments are not supported (in the call to {name})")
    if any(isinstance(arg, ast.Starred) for arg in node.args):
        raise _invalid(f"starred arguments are not supported (in the call to {name})")
    count, low, high = len(node.args), function.min_args, function.max_args
    if count < low or (high is not None and count > high):
        expected = (
            f"at least {low}" if high is None else " or ".join(map(str, range(low, high + 1)))
        )
        raise _invalid(f"{name}() takes {expected} argument(s), got {count}")
    args = [_evaluate(arg) for arg in node.args]
    try:
        return _checked(function.call(*args))
    except ValueError:
        shown = ", ".join(_show(arg) for arg in args)
        raise ToolError(
            f"math domain error: {name}({shown}) is undefined for real numbers"
        ) from None
    except TypeError as exc:
        raise ToolError(f"{name}: {exc}") from None


def _guard_binary(symbol: str, left: Number, right: Number) -> None:
    """Refuses integer operations whose result would be too large, before computing them."""
    if not (isinstance(left, int) and isinstance(right, int)):
        return
    if symbol == "*":
        _check_bits(left.bit_length() + right.bit_length(), f"{_show(left)} * {_show(right)}")
    elif symbol == "**" and right > 0 and abs(left) > 1:
        bits = math.ceil(right * math.log2(abs(left))) if right < 2**64 else 2**64
        _check_bits(bits, f"{_show(left)} ** {_show(right)}")


def _check_bits(bits: int, what: str) -> None:
    if bits > _MAX_INT_BITS:
        digits = math.ceil(bits * math.log10(2))
        raise ToolError(
            f"the result of {what} would have about {digits} digits; the limit is {MAX_INT_DIGITS}"
        )


def _checked(value: Any) -> Number:
    if isinstance(value, complex):
        raise ToolError("math domain error: the result is not a real number")
    if isinstance(value, float):
        return _finite(value)
    assert isinstance(value, int)
    _check_bits(value.bit_length(), "the expression")
    return value


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ToolError("overflow: the result is too large to represent")
    return value


def _normalise(value: Number) -> Number:
    """Ints stay exact; integral floats below 2**53 become ints; other floats keep 15
    significant digits, which hides binary noise (0.1 + 0.2 -> 0.3)."""
    if isinstance(value, int):
        if (digits := _digit_count(value)) > MAX_RESULT_DIGITS:
            raise ToolError(
                f"the result has about {digits} digits; at most {MAX_RESULT_DIGITS} can be returned"
            )
        return value
    if value.is_integer() and abs(value) < _EXACT_FLOAT_LIMIT:
        return int(value)
    return float(f"{value:.15g}")


def _digit_count(value: int) -> int:
    return max(1, math.ceil(abs(value).bit_length() * math.log10(2)))


def _show(value: Number) -> str:
    if isinstance(value, int) and value.bit_length() > 1_000:
        return f"<an integer of about {_digit_count(value)} digits>"
    return repr(value)


def _describe_constant(value: object) -> str:
    if isinstance(value, bool):
        return "booleans"
    if isinstance(value, complex):
        return "complex numbers"
    if isinstance(value, str | bytes):
        return "strings"
    return repr(value)


def _invalid(message: str) -> InvalidToolArguments:
    return InvalidToolArguments(TOOL_NAME, [FieldError("expression", message)])


def _definition() -> ToolDefinition:
    return ToolDefinition(
        name=TOOL_NAME,
        type=ToolType.SKILL,
        description=(
            "Evaluates an arithmetic expression and returns its numeric result; use it for any "
            "calculation instead of computing in your head. Supports + - * / // (floor "
            "division) % (remainder) ** (power; ^ also means power), parentheses, the "
            f"functions {', '.join(_FUNCTIONS)}, and the constants pi, e, tau. Integers are "
            "exact; other results are rounded to 15 significant digits. Angles are in "
            "radians. Write numbers without thousands separators (commas separate arguments)."
        ),
        parameters={
            "type": "object",
            "properties": {
                "expression": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_EXPRESSION_CHARS,
                    "description": "The expression, e.g. '17 * 23 + 4' or 'sqrt(2) / 2'.",
                }
            },
            "required": ["expression"],
            "additionalProperties": False,
        },
        returns_description="An object with the expression and its numeric result.",
        timeout_s=5,
        retry=NO_RETRY,
        idempotent=True,
        visibility=ToolVisibilityConfig(summary_template="{expression} = {result}"),
    )


class CalculatorTool(BaseTool):
    """Exact, sandboxed arithmetic for models that should not do sums in their heads."""

    def __init__(self) -> None:
        self._definition = _definition()

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        expression: str = arguments["expression"]
        return ToolOutput(value={"expression": expression, "result": evaluate(expression)})
