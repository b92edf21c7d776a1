"""Every error raised in app/ is answered with a documented problem type.

Each `raise` in app/ is read from the source and its error class found in the module that
raises it (a class, or the function building it, by its return annotation). A class of ours
must subclass `OmniForgeError`, and the one table (`app.api.errors.ANSWERS`, looked up along
the class hierarchy) answers it with a problem type of the catalogue that the documentation's
error table lists; one without a row is answered `internal-error`, documented too. An
`ApiError` is raised with a catalogue type named at the raise. Builtin and third-party errors
(a pydantic validator's `ValueError`, an A2A SDK error the SDK renders itself) are theirs to
render, or faults (`internal-error`)."""

import ast
import builtins
import importlib
import inspect
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.exceptions import HTTPException

from app.api.errors import ANSWERS, HTTP_PROBLEMS, ApiError, answer_for
from app.api.inputs import BodyTooLarge
from app.errors import INTERNAL, OmniForgeError, ProblemType, problem_catalogue

APP = Path(__file__).resolve().parents[1] / "app"


@dataclass(frozen=True)
class Raise:
    module: str
    line: int
    name: str  # as written: `NotFound`, `errors.NotFound`, `_invalid`
    call: ast.Call | None


def _module_name(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _raises() -> Iterator[Raise]:
    for path in sorted(APP.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            call = node.exc if isinstance(node.exc, ast.Call) else None
            target = call.func if call is not None else node.exc
            name = ast.unparse(target)
            yield Raise(_module_name(path), node.lineno, name, call)


def _resolve(raised: Raise) -> object | None:
    """What `raised.name` is in its module: a class, a function, or None for a local name
    (re-raising what an `except` caught, or an error built a few lines above)."""
    module = importlib.import_module(raised.module)
    head, *rest = raised.name.split(".")
    found: object = getattr(module, head, getattr(builtins, head, None))
    for part in rest:
        found = getattr(found, part, None)
    return found


def _error_class(raised: Raise) -> type[BaseException] | None:
    found = _resolve(raised)
    if isinstance(found, type) and issubclass(found, BaseException):
        return found
    if callable(found) and raised.call is not None:  # a function that builds the error
        hints = typing.get_type_hints(found)
        built = hints.get("return")
        where = f"{raised.module}:{raised.line} raises what {raised.name} returns"
        assert isinstance(built, type), f"{where}, annotated {built!r}"
        assert issubclass(built, BaseException), f"{where}, annotated {built!r}"
        return built
    return None


RAISES = list(_raises())
# Control flow, not errors: a run handing its task back, a call waiting for approval, a
# document reader out of its CPU. None reaches the adapters.
SIGNALS = {"RunReleased", "ApprovalPending", "_OutOfCpu"}


def _documented() -> dict[str, ProblemType]:
    return {problem.uri: problem for problem in problem_catalogue()}


def test_the_source_has_the_raises_this_test_reads() -> None:
    """The reading itself works: it finds the raises a reader sees (hundreds, of tens of
    our classes)."""
    classes = {cls for raised in RAISES if (cls := _error_class(raised)) is not None}
    ours = {cls for cls in classes if cls.__module__.startswith("app.")}
    assert len(RAISES) > 300
    assert {"NotFound", "ApiError", "AuthenticationFailed", "ToolError"} <= {
        cls.__name__ for cls in ours
    }


def test_every_error_class_of_ours_that_is_raised_subclasses_the_base() -> None:
    strays = []
    http: set[type[BaseException]] = set()
    for raised in RAISES:
        cls = _error_class(raised)
        if cls is None or not cls.__module__.startswith("app."):
            continue
        if cls.__name__ in SIGNALS:
            assert not issubclass(cls, Exception), f"{cls.__name__} would be caught as an error"
            continue
        if issubclass(cls, HTTPException):  # read by Starlette: answered by its status
            http.add(cls)
            continue
        if not issubclass(cls, OmniForgeError):
            strays.append(f"{raised.module}:{raised.line} raises {cls.__qualname__}")
    assert strays == []
    # The one HTTP error of ours: a body over the limit, found while a route reads it.
    assert http == {BodyTooLarge}
    assert HTTP_PROBLEMS[BodyTooLarge(1).status_code] in problem_catalogue()


def test_every_raised_error_is_answered_with_a_documented_problem() -> None:
    documented = _documented()
    undocumented = []
    for raised in RAISES:
        cls = _error_class(raised)
        if cls is None or not issubclass(cls, OmniForgeError) or cls is ApiError:
            continue
        answer = answer_for(cls)
        problems = (INTERNAL,) if answer is None else answer.problems
        undocumented += [
            f"{raised.module}:{raised.line} {cls.__qualname__} -> {p.slug}"
            for p in problems
            if documented.get(p.uri) != p
        ]
    assert undocumented == []


def test_an_api_error_is_raised_with_a_documented_problem_named_where_it_is_raised() -> None:
    documented = _documented()
    seen = 0
    for raised in RAISES:
        if raised.call is None or _error_class(raised) is not ApiError:
            continue
        if raised.name != "ApiError":  # built by a helper: read the helper's own raise
            function = _resolve(raised)
            source = inspect.getsource(function)  # type: ignore[arg-type]
            calls = [
                node
                for node in ast.walk(ast.parse(source.lstrip()))
                if isinstance(node, ast.Call) and ast.unparse(node.func) == "ApiError"
            ]
        else:
            calls = [raised.call]
        module = importlib.import_module(raised.module)
        for call in calls:
            problem = eval(ast.unparse(call.args[0]), vars(module))  # a constant's name
            assert isinstance(problem, ProblemType)
            assert documented.get(problem.uri) == problem, (
                f"{raised.module}:{raised.line} answers {problem.slug}, not in the catalogue"
            )
            seen += 1
    assert seen > 20


def test_every_row_of_the_table_is_documented() -> None:
    documented = _documented()
    for cls, answer in ANSWERS.items():
        assert issubclass(cls, OmniForgeError)
        for problem in answer.problems:
            assert documented.get(problem.uri) == problem, f"{cls.__name__}: {problem.slug}"


@pytest.mark.parametrize("problem", problem_catalogue(), ids=lambda p: p.slug)
def test_each_problem_type_says_what_it_means(problem: ProblemType) -> None:
    assert problem.title
    assert len(problem.description) > 30
    assert 400 <= problem.status < 600


def test_the_catalogue_has_one_entry_per_type() -> None:
    slugs = [problem.slug for problem in problem_catalogue()]
    assert len(slugs) == len(set(slugs))


def test_an_error_without_a_row_is_answered_as_its_nearest_ancestor() -> None:
    from app.runs.errors import InvalidSubmission, ModelNotApproved, ToolsNotPermitted

    class Narrower(ModelNotApproved):
        pass

    assert answer_for(Narrower) is ANSWERS[ModelNotApproved]
    assert answer_for(ToolsNotPermitted) is not answer_for(InvalidSubmission)
    assert answer_for(ValueError) is None
