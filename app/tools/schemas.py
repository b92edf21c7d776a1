"""JSON Schemas written by users (an agent's `response_format`, a tool's parameters), checked
and applied with their patterns run by `app.tools.patterns` instead of Python's `re`.

jsonschema matches `pattern`, `patternProperties` (also when working out `additionalProperties`)
and `format: regex` with `re`; the validator classes here replace those keywords. Working out
`unevaluatedProperties` matches `patternProperties` with `re` deep inside jsonschema, so a
schema combining the two is refused rather than run unbounded.
"""

import json
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend, validator_for

from app.errors import OmniForgeError
from app.tools.patterns import PatternRefused, compiled, search

MAX_SCHEMA_BYTES = 65_536
"""A user's JSON Schema (a `response_format`, an `input_schema`) may be at most this large as
compact JSON: checking one costs about a millisecond per kilobyte, and each agent version
stores its own copy."""

# What `validator_for` answers for a `$schema` naming no draft it knows.
_NO_DRAFT: Any = object()


_COMBINED = (
    "not usable: `patternProperties` cannot be combined with `unevaluatedProperties` (their "
    "patterns would be matched without a time limit)"
)


class SchemaRefused(OmniForgeError, ValueError):
    """Not a JSON Schema this service applies; the message says why and where."""


def applied_validator(schema: dict[str, Any]) -> Validator:
    """A validator of `schema` (its `$schema`'s draft; 2020-12 when it names none or one this
    service does not know) whose patterns run bounded; `SchemaRefused` when `schema` does not
    pass its metaschema, has a pattern the bounded engine refuses, or combines
    `patternProperties` with `unevaluatedProperties`."""
    base: Any = validator_for(schema, default=Draft202012Validator)
    try:
        base.check_schema(schema, format_checker=format_checker(base))
    except SchemaError as exc:
        raise SchemaRefused(_refusal(exc)) from exc
    if _combines_unevaluated_and_patterns(schema):
        raise SchemaRefused(_COMBINED)
    return unchecked_validator(schema)


def unchecked_validator(schema: dict[str, Any]) -> Validator:
    """A validator of `schema` whose patterns run bounded, for a schema trusted to be valid
    (or whose errors may surface when it is applied)."""
    combined = _combines_unevaluated_and_patterns(schema)
    cls = safe_class(validator_for(schema, default=Draft202012Validator), combined)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def size_problem(schema: Any, limit: int = MAX_SCHEMA_BYTES) -> str | None:
    """Why `schema` is too large (more than `limit` bytes as compact UTF-8 JSON), or None."""
    size = len(json.dumps(schema, ensure_ascii=False, separators=(",", ":")).encode())
    if size <= limit:
        return None
    return f"is {size:,} bytes as JSON; at most {limit:,} are accepted"


def has_patterns(schema: dict[str, Any]) -> bool:
    """Whether applying `schema` may match a pattern that can take long (then it is applied
    off the event loop: the budget bounds how long, not whether the loop would wait). A
    pattern of the linear kind (`_LINEAR`: anchored at the start, at most one part that
    repeats a variable number of times, no group or alternative) cannot backtrack."""
    for node in _objects(schema):
        if "patternProperties" in node:
            return True
        pattern = node.get("pattern")
        if isinstance(pattern, str) and not _linear(pattern):
            return True
    return False


# One part of a linear pattern: a character class, an escaped character or a plain one, with
# a fixed count ({n}) or a variable one (*, +, ?, {n,}, {n,m}).
_PART = r"(?:\[[^\]\\]*(?:\\.[^\]\\]*)*\]|\\.|[^\\()|\[\]{}*+?^$])"
_FIXED = r"(?:\{\d+\})?"
_VARIABLE = r"(?:[*+?]|\{\d+,\d*\})"
_LINEAR = re.compile(rf"\^(?:{_PART}{_FIXED})*(?:{_PART}{_VARIABLE}(?:{_PART}{_FIXED})*)?\$?")


def _linear(pattern: str) -> bool:
    return _LINEAR.fullmatch(pattern) is not None


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why `schema` is not a JSON Schema this service applies, or None: checked against the
    metaschema of the draft its `$schema` names (2020-12 when it names none), its patterns
    compiled by the bounded engine."""
    base: Any = Draft202012Validator
    if "$schema" in schema:
        declared = schema["$schema"]
        if not isinstance(declared, str):
            return "`$schema` must be a string naming a JSON Schema draft"
        try:
            base = validator_for(schema, default=_NO_DRAFT)
        except ValueError:  # not even a URI ("http://[::1")
            base = _NO_DRAFT
        if base is _NO_DRAFT:
            return f"`$schema` names no JSON Schema draft this service knows: {declared!r}"
    try:
        base.check_schema(schema, format_checker=format_checker(base))
    except SchemaError as exc:
        return _refusal(exc)
    if _combines_unevaluated_and_patterns(schema):
        return _COMBINED
    return None


def format_checker(base: type[Validator]) -> FormatChecker:
    """`base`'s format checker with `regex` compiled by the bounded engine: for checking a
    schema against its metaschema (`check_schema(schema, format_checker=...)`)."""
    checker: FormatChecker = safe_class(base).FORMAT_CHECKER
    return checker


def _refusal(exc: SchemaError) -> str:
    where = "/".join(str(part) for part in exc.path)
    at = f" at {where}" if where else ""
    if isinstance(exc.cause, PatternRefused):
        return f"not a usable JSON Schema{at}: {exc.cause}"
    return f"not a valid JSON Schema{at}: {exc.message}"


@cache
def safe_class(base: type[Validator], refuse_unevaluated: bool = False) -> type[Validator]:
    """`base` with its pattern keywords and `regex` format run by the bounded engine; with
    `refuse_unevaluated`, an `unevaluatedProperties` fails every value it applies to."""
    overrides: dict[str, Any] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    if refuse_unevaluated:
        overrides["unevaluatedProperties"] = _unevaluated_refused
    checker = FormatChecker(base.FORMAT_CHECKER.checkers)
    checker.checks("regex", raises=PatternRefused)(_is_regex)
    extended: type[Validator] = extend(  # type: ignore[no-untyped-call]
        base,
        validators={k: v for k, v in overrides.items() if k in base.VALIDATORS},
        format_checker=checker,
    )
    return extended


def _is_regex(instance: object) -> bool:
    if isinstance(instance, str):
        compiled(instance)
    return True


def _matches(pattern: str, text: str) -> bool:
    """`PatternTimeout` propagates: the whole check stops, its caller says why."""
    try:
        return search(pattern, text)
    except PatternRefused:
        # Stored before patterns were checked this way: no value matches what cannot run.
        return False


def _pattern(
    validator: Validator, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _matches(pattern, str(instance)):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if _matches(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    # jsonschema's own, with the names matched by the bounded engine.
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = [
        name
        for name in instance
        if name not in known and not any(_matches(pattern, name) for pattern in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        names = sorted(extras, key=str)
        if patterns:
            verb = "does" if len(names) == 1 else "do"
            joined = ", ".join(repr(name) for name in names)
            listed = ", ".join(repr(pattern) for pattern in sorted(patterns))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {listed}")
        else:
            verb = "was" if len(names) == 1 else "were"
            joined = ", ".join(repr(name) for name in names)
            yield ValidationError(
                f"Additional properties are not allowed ({joined} {verb} unexpected)"
            )


def _unevaluated_refused(
    validator: Validator, unevaluated: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "object"):
        yield ValidationError(_COMBINED)


def _combines_unevaluated_and_patterns(schema: dict[str, Any]) -> bool:
    return _uses(schema, "unevaluatedProperties") and _uses(schema, "patternProperties")


def _uses(node: Any, keyword: str) -> bool:
    """Whether `keyword` is a key anywhere in `node`."""
    return any(keyword in current for current in _objects(node))


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object in `node`, itself included (iteratively: schemas may nest deep)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            yield current
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
