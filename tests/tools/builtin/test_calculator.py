"""The calculator evaluates arithmetic exactly and refuses everything that is not arithmetic."""

import time
from typing import Any

import pytest

from app.chain import ErrorCode, ReasoningChain, ToolType
from app.tools.builtin import CalculatorTool, builtin_tools
from app.tools.builtin.calculator import evaluate
from app.tools.errors import ErrorClass, InvalidToolArguments, ToolError
from app.tools.executor import ToolExecutor
from app.tools.models import NO_RETRY, ToolCallContext
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult


def _context(chain: ReasoningChain) -> ToolCallContext:
    return ToolCallContext(task_id="t", agent_id="a", chain_id=chain.id)


async def _run(arguments: dict[str, Any] | str) -> ToolResult:
    chain = ReasoningChain(task_id="t", agent_id="a")
    executor = ToolExecutor(ToolRegistry([CalculatorTool()]))
    return await executor.execute(chain, _context(chain), "calculator", arguments)


def _refusal(expression: str) -> str:
    """The message of the field error the expression is refused with."""
    with pytest.raises(InvalidToolArguments) as caught:
        evaluate(expression)
    [error] = caught.value.field_errors
    assert error.field == "expression"
    return error.message


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("17 * 23 + 4", 395),
        ("10 / 2", 5),
        ("0.1 + 0.2", 0.3),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("2 ** 10", 1024),
        ("-(3 - 5) * +2", 4),
        ("(1 + 2) * (3 + 4)", 21),
        ("1.5e3 + 1", 1501),
        ("  2 + 2  ", 4),
        ("1 / 3", 0.333333333333333),
    ],
)
def test_arithmetic_gives_exact_and_tidy_results(expression: str, expected: float) -> None:
    result = evaluate(expression)

    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2^10", 1024),
        ("3 × 4", 12),
        ("3 · 4", 12),
        ("9 ÷ 3", 3),
        ("10 − 4", 6),
        ("2^3^2", 512),
    ],
)
def test_friendly_operators_are_understood(expression: str, expected: int) -> None:
    assert evaluate(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("sqrt(16)", 4),
        ("sqrt(2)", 1.4142135623731),
        ("cbrt(27)", 3),
        ("exp(0)", 1),
        ("log(e)", 1),
        ("log(8, 2)", 3),
        ("log10(1000)", 3),
        ("log2(1024)", 10),
        ("sin(0) + cos(0)", 1),
        ("tan(pi / 4)", 1),
        ("degrees(asin(1))", 90),
        ("degrees(acos(0))", 90),
        ("atan(1) * 4", 3.14159265358979),
        ("atan2(1, 1) * 4", 3.14159265358979),
        ("sinh(0) + cosh(0) + tanh(0)", 1),
        ("abs(-5)", 5),
        ("round(2.5)", 2),
        ("round(3.14159, 2)", 3.14),
        ("round(123456, -3)", 123000),
        ("floor(-2.5)", -3),
        ("ceil(2.1)", 3),
        ("trunc(-2.7)", -2),
        ("min(3, 1, 2)", 1),
        ("max(3, 1, 2)", 3),
        ("factorial(10)", 3628800),
        ("gcd(12, 18)", 6),
        ("lcm(4, 6, 10)", 60),
        ("hypot(3, 4)", 5),
        ("radians(180)", 3.14159265358979),
        ("pi", 3.14159265358979),
        ("e", 2.71828182845905),
        ("tau", 6.28318530717959),
    ],
)
def test_functions_and_constants(expression: str, expected: float) -> None:
    assert evaluate(expression) == expected


def test_big_integers_within_the_limits_stay_exact() -> None:
    assert evaluate("2 ** 1000") == 2**1000
    assert evaluate("factorial(1000)") % 10**200 == 0
    assert len(str(evaluate("factorial(1000)"))) == 2568
    # Intermediates may exceed what can be returned, as long as the result fits.
    assert evaluate("2 ** 20000 // 2 ** 19990") == 1024


def test_floats_beyond_exact_range_stay_floats_with_15_significant_digits() -> None:
    result = evaluate("2.0 ** 60")

    assert result == 1.15292150460685e18
    assert isinstance(result, float)


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("__import__('os').system('x')", "only plain function names can be called"),
        ("__import__('os')", "function '__import__' is not supported; use one of: pi"),
        ("(1).__class__", "attribute access"),
        ("[1, 2]", "lists cannot be used"),
        ("(1, 2)", "tuples cannot be used"),
        ("{1: 2}", "dictionaries cannot be used"),
        ("[x for x in (1, 2)]", "comprehensions cannot be used"),
        ("'a' * 3", "strings cannot be used"),
        ("f'{1}'", "strings cannot be used"),
        ("lambda: 1", "lambda functions cannot be used"),
        ("round(2.5, ndigits=1)", "keyword arguments are not supported"),
        ("max(*(1, 2))", "starred arguments are not supported"),
        ("sqrt(x)", "name 'x' is not supported"),
        ("foo(1)", "function 'foo' is not supported; use one of:"),
        ("sqrt", "sqrt is a function; call it like sqrt(...)"),
        ("sqrt(1, 2)", "sqrt() takes 1 argument(s), got 2"),
        ("atan2(1)", "atan2() takes 2 argument(s), got 1"),
        ("log(1, 2, 3)", "log() takes 1 or 2 argument(s), got 3"),
        ("max()", "max() takes at least 1 argument(s), got 0"),
        ("1 < 2", "comparisons cannot be used"),
        ("1 and 2", "'and' / 'or' cannot be used"),
        ("1 if 1 else 2", "conditional expressions cannot be used"),
        ("1 & 2", "the operator '&' is not supported"),
        ("1 << 2", "the operator '<<' is not supported"),
        ("~1", "the operator '~' is not supported"),
        ("not 1", "the operator 'not' is not supported"),
        ("True + 1", "booleans cannot be used"),
        ("2j", "complex numbers cannot be used"),
        ("x[0]", "indexing"),
        ("(y := 2)", "assignments"),
        ("1 +", "is not a valid arithmetic expression"),
        ("2 * (3", "is not a valid arithmetic expression: '(' was never closed (at column 5)"),
        ("1,000", "tuples cannot be used"),
        ("1 +" + " 1 +" * 150 + " 1", "is too complex"),
    ],
)
def test_anything_but_arithmetic_is_refused(expression: str, fragment: str) -> None:
    assert fragment in _refusal(expression)


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("9**9**9", "the result of 9 ** 387420489 would have about 369693100 digits"),
        ("factorial(10**6)", "factorial(1000000) is too large; the limit is 1000"),
        ("(10**5000) * (10**6000)", "the limit is 10000"),
        ("2 ** 20000", "the result has about 6021 digits; at most 4000 can be returned"),
        ("lcm(2**20000 + 1, 2**20000 - 1)", "lcm(...) would have about"),
    ],
)
def test_huge_results_are_refused_before_they_are_computed(expression: str, fragment: str) -> None:
    started = time.perf_counter()
    with pytest.raises(ToolError) as caught:
        evaluate(expression)

    assert fragment in caught.value.message
    assert caught.value.error_class is ErrorClass.PERMANENT
    assert time.perf_counter() - started < 1.0


def test_rounding_to_absurd_precision_stays_cheap() -> None:
    started = time.perf_counter()

    assert evaluate("round(5, -10**30)") == 0
    assert evaluate("round(1.25, 10**30)") == 1.25
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 / 0", "division by zero"),
        ("1 // 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("log(8, 1)", "division by zero"),
        ("sqrt(-1)", "math domain error: sqrt(-1) is undefined for real numbers"),
        ("log(0)", "math domain error: log(0) is undefined for real numbers"),
        ("acos(2)", "math domain error: acos(2) is undefined for real numbers"),
        ("(-8) ** (1/3)", "math domain error: the result is not a real number"),
        ("factorial(-1)", "math domain error: factorial(-1) is undefined for negative numbers"),
        ("factorial(2.5)", "factorial needs whole numbers, not 2.5"),
        ("gcd(1.5, 3)", "gcd needs whole numbers, not 1.5"),
        ("exp(1000)", "overflow: the result is too large to represent"),
        ("1e308 * 10", "overflow: the result is too large to represent"),
        ("2.0 ** 10000", "overflow: the result is too large to represent"),
        ("1e999", "overflow: the result is too large to represent"),
        ("10**400 / 3", "overflow: the result is too large to represent"),
    ],
)
def test_arithmetic_errors_are_tool_errors(expression: str, message: str) -> None:
    with pytest.raises(ToolError) as caught:
        evaluate(expression)

    assert not isinstance(caught.value, InvalidToolArguments)
    assert caught.value.message == message


def test_definition_describes_the_tool() -> None:
    definition = CalculatorTool().definition

    assert definition.name == "calculator"
    assert definition.type is ToolType.SKILL
    assert definition.retry == NO_RETRY
    assert definition.timeout_s == 5
    assert "^ also means power" in definition.description
    assert "sqrt" in definition.description
    assert definition.parameters["required"] == ["expression"]
    assert definition.parameters["additionalProperties"] is False
    assert definition.parameters["properties"]["expression"]["maxLength"] == 500


def test_builtin_tools_are_fresh_instances() -> None:
    first, second = builtin_tools(), builtin_tools()

    assert [tool.definition.name for tool in first] == [
        "calculator",
        "current_time",
        "list_files",
        "read_file",
        "search_files",
        "web_fetch",
        "http_request",
        "json_query",
        "text_transform",
        "todo_add",
        "todo_list",
        "todo_complete",
        "todo_delete",
    ]
    assert all(a is not b for a, b in zip(first, second, strict=True))


async def test_execute_returns_the_expression_and_its_result() -> None:
    chain = ReasoningChain(task_id="t", agent_id="a")

    output = await CalculatorTool().execute({"expression": "17 * 23 + 4"}, _context(chain))

    assert output.value == {"expression": "17 * 23 + 4", "result": 395}


async def test_executor_records_the_result_and_its_summary() -> None:
    result = await _run({"expression": "17 * 23 + 4"})

    assert result.success
    assert result.info.result == {"expression": "17 * 23 + 4", "result": 395}
    assert result.result_step.visibility.summary == "17 * 23 + 4 = 395"


async def test_executor_reports_a_missing_expression() -> None:
    result = await _run({})

    assert not result.success
    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert result.error is not None
    assert "expression: is required" in result.error


async def test_executor_names_an_unexpected_argument() -> None:
    result = await _run({"expression": "1 + 1", "precision": 3})

    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert result.error is not None
    assert "precision: is not a known argument (expected: expression)" in result.error


async def test_executor_refuses_an_overlong_expression() -> None:
    result = await _run({"expression": "1" * 501})

    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert result.error is not None
    assert result.error.startswith("invalid arguments for calculator: expression:")


async def test_executor_reports_refused_syntax_as_invalid_arguments() -> None:
    result = await _run({"expression": "__import__('os').system('x')"})

    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert result.error is not None
    assert "expression: only plain function names can be called" in result.error


async def test_executor_reports_division_by_zero_once_without_retrying() -> None:
    result = await _run({"expression": "1 / 0"})

    assert not result.success
    assert result.error_code is ErrorCode.TOOL_ERROR
    assert result.error == "division by zero"
    assert result.info.attempts == 1
    assert result.result_step.visibility.summary == "calculator failed: tool_error"
