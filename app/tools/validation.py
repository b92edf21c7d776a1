"""Checks tool-call arguments against a tool's JSON Schema, naming every bad field."""

import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from app.tools.errors import FieldError


def compile_validator(parameters: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(parameters, format_checker=Draft202012Validator.FORMAT_CHECKER)


def field_errors(validator: Draft202012Validator, arguments: Any) -> list[FieldError]:
    """Every schema violation of `arguments`, one per field, in field order."""
    if not isinstance(arguments, dict):
        return [FieldError("", f"arguments must be a JSON object, not {type(arguments).__name__}")]
    errors: list[FieldError] = []
    for error in validator.iter_errors(arguments):
        errors.extend(_describe(error))
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
            if name not in known and not any(re.search(p, name) for p in patterns)
        ]
        expected = ", ".join(sorted(known)) or "none"
        return [
            FieldError(prefix + name, f"is not a known argument (expected: {expected})")
            for name in extra
        ]
    return [FieldError(path, error.message)]
