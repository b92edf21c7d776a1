"""Checks tool-call arguments against a tool's JSON Schema, naming every bad field. The
schema's patterns run by the bounded engine of `app.tools.patterns` within one budget per
call; a schema with patterns is applied in one of the tenant's worker threads."""

from typing import Any

from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

from app.bulkheads import TenantThreads
from app.tools.errors import FieldError
from app.tools.patterns import PatternRefused, PatternTimeout, pattern_budget, search
from app.tools.schemas import unchecked_validator


def compile_validator(parameters: dict[str, Any]) -> Validator:
    return unchecked_validator(parameters)


async def argument_errors(
    validator: Validator,
    arguments: Any,
    *,
    off_loop: bool,
    threads: TenantThreads,
    tenant_id: str | None,
) -> list[FieldError]:
    """`field_errors`, in one of the tenant's worker threads when `off_loop` (the schema has
    patterns, each of which may take up to the budget to match)."""
    if off_loop:
        return await threads.run(tenant_id, field_errors, validator, arguments)
    return field_errors(validator, arguments)


def field_errors(validator: Validator, arguments: Any) -> list[FieldError]:
    """Every schema violation of `arguments`, one per field, in field order. Blocks for up to
    the pattern budget when the schema has patterns."""
    if not isinstance(arguments, dict):
        return [FieldError("", f"arguments must be a JSON object, not {type(arguments).__name__}")]
    errors: list[FieldError] = []
    try:
        with pattern_budget():
            for error in validator.iter_errors(arguments):
                errors.extend(_describe(error))
    except PatternTimeout as exc:
        return [FieldError("", f"the arguments cannot be checked: {exc}")]
    return sorted(set(errors), key=lambda e: (e.field, e.message))


def _describe(error: ValidationError) -> list[FieldError]:
    path = ".".join(str(part) for part in error.absolute_path)
    prefix = f"{path}." if path else ""
    required = error.validator_value
    if error.validator == "required" and isinstance(error.instance, dict):
        assert isinstance(required, list)
        missing = [name for name in required if name not in error.instance]
        return [FieldError(prefix + name, "is required") for name in missing]
    schema = error.schema
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        assert isinstance(schema, dict)
        known = set(schema.get("properties", {}))
        patterns = list(schema.get("patternProperties", {}))
        extra = [
            name
            for name in error.instance
            if name not in known and not any(_matches(p, name) for p in patterns)
        ]
        expected = ", ".join(sorted(known)) or "none"
        return [
            FieldError(prefix + name, f"is not a known argument (expected: {expected})")
            for name in extra
        ]
    return [FieldError(path, error.message)]


def _matches(pattern: str, name: str) -> bool:
    try:
        return search(pattern, name)
    except PatternRefused:
        return False
