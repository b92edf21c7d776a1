"""Structured output: an agent's `response_format`, a JSON Schema its final answer must match.

The answer is parsed as JSON (a ```json fence around it is tolerated, nothing else) and checked
with the validator of the schema's `$schema` (2020-12 when it names none), its patterns run by
the bounded engine of `app.tools.patterns` within one budget per answer: a check may take a
moment, so runs make it in a worker thread. The schema was
checked when its definition was stored, but a run checks it again: a definition stored by an
older version of the service, or written to the database by hand, must fail its task with a
clear `invalid_output`, not an internal error.
"""

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from jsonschema.exceptions import ValidationError, relevance
from jsonschema.protocols import Validator
from referencing.exceptions import Unresolvable

from app.errors import OmniForgeError
from app.tools.patterns import PatternTimeout, pattern_budget
from app.tools.schemas import SchemaRefused, applied_validator

SCHEMA_NAME = "final_answer"
"""The name a native `response_format` gives the schema (providers require one)."""

MAX_ERRORS = 10
"""At most this many validation errors are reported (the model and the task's message)."""

_MAX_ERROR_CHARS = 300
_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(?P<body>.*?)\n?[ \t]*```\Z", re.DOTALL | re.IGNORECASE)


class InvalidResponseFormat(OmniForgeError, ValueError):
    """The `response_format` is no usable JSON Schema; no answer could ever match it."""


@dataclass(frozen=True, slots=True)
class OutputCheck:
    """A final answer judged: its JSON `value` when it matches, else what is wrong with it."""

    value: Any = None
    errors: tuple[str, ...] = ()

    @property
    def valid(self) -> bool:
        return not self.errors


class OutputFormat:
    """One agent's `response_format`, ready to be asked for and checked."""

    def __init__(self, schema: dict[str, Any]) -> None:
        dialect = schema.get("$schema")
        if dialect is not None and not isinstance(dialect, str):
            raise InvalidResponseFormat("`$schema` must be a string (a JSON Schema dialect URI)")
        try:
            self._validator: Validator = applied_validator(schema)
        except SchemaRefused as exc:
            raise InvalidResponseFormat(_clipped(str(exc))) from exc
        self.schema = schema

    @property
    def native_request(self) -> dict[str, Any] | None:
        """The request's `response_format` when a provider can enforce the schema itself; None
        when its top level is not an object (OpenAI's structured outputs take only objects):
        the model is then told the schema in its system prompt instead."""
        if self.schema.get("type") != "object":
            return None
        return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "schema": self.schema}}

    def instructions(self, *, text_format: bool) -> str:
        """What the system prompt says when the provider is not asked to enforce the schema."""
        where = "Your Final Answer must be" if text_format else "Your final answer must be"
        return (
            f"{where} a single JSON value matching this JSON Schema, with no other text "
            f"(no comments, no explanation):\n{json.dumps(self.schema, ensure_ascii=False)}"
        )

    def check(self, answer: str) -> OutputCheck:
        """The answer as JSON if it matches the schema; else its problems, most relevant
        first. `InvalidResponseFormat` when the schema turns out unusable ($ref to nowhere,
        a reference cycle). An answer whose patterns take longer than the budget to match
        does not match. Blocks for up to that budget: call it in a worker thread."""
        text = answer.strip()
        fenced = _FENCE.match(text)
        if fenced is not None:
            text = fenced["body"].strip()
        try:
            value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
        except (ValueError, RecursionError) as exc:
            return OutputCheck(errors=(_clipped(f"the answer is not JSON: {exc}"),))
        try:
            with pattern_budget():
                errors = sorted(self._validator.iter_errors(value), key=relevance)
        except PatternTimeout as exc:
            return OutputCheck(errors=(_clipped(f"the answer cannot be checked: {exc}"),))
        except (Unresolvable, RecursionError) as exc:
            raise InvalidResponseFormat(_clipped(f"the schema cannot be applied: {exc}")) from exc
        if errors:
            return OutputCheck(errors=tuple(_describe(error) for error in errors[:MAX_ERRORS]))
        return OutputCheck(value=value)

    @staticmethod
    def feedback(errors: tuple[str, ...], *, text_format: bool) -> str:
        """What the model is told of an answer that does not match, to answer again."""
        listed = "\n".join(f"- {error}" for error in errors)
        if text_format:
            return (
                "Observation: your Final Answer does not match the required JSON Schema:\n"
                f"{listed}\nReply with Thought and a Final Answer that is only the corrected "
                "JSON."
            )
        return (
            f"Your answer does not match the required JSON Schema:\n{listed}\n"
            "Reply with only the corrected JSON."
        )


def _no_constant(name: str) -> Any:
    # NaN and Infinity are not JSON, and no database stores them in a JSON column.
    raise ValueError(f"{name} is not a JSON value")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999
        raise ValueError(f"{text} is out of range for a JSON number")
    return value


def _describe(error: ValidationError) -> str:
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.path)
    return _clipped(f"at ${path}: {error.message}")


def _clipped(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 1] + "…"
