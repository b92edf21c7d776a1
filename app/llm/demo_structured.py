"""The offline demo model's answer in the shape an agent's `response_format` asks for.

The demo thinks up no content: it fills in the JSON Schema. Its answer goes where it fits, in the
order the schema declares things: its text into the first string with room for it, its number
(an arithmetic result) into the first number or integer that takes it. Everything else is
`const`, else `default`, else the first of `examples` or `enum`, else the least value the
type's bounds allow (an empty string, 0 or the minimum, false, null, as few items as allowed);
an object gets its required properties, and an optional one only to hold the answer. A `pattern`
is never run here (a pattern of an agent's definition could take the process hostage): a
default or an example is trusted to meet it, else the usual value is given and may miss it, and
the task then fails `invalid_output` like any model's wrong answer.

The schema comes as an OpenAI `response_format` (when the deployment is asked to enforce it)
or stated in the system prompt (otherwise: the agents' `OutputFormat.instructions` says
"…matching this JSON Schema…:" followed by the schema on the next line).
"""

import json
import math
import re
from typing import Any

# A value built no deeper than this (a schema that refers to itself stops here, with null).
_MAX_DEPTH = 32
# Lengths and counts a schema may ask for beyond which the demo does not try to meet them.
_MAX_ITEMS = 64
_MAX_CHARS = 4096
_SCHEMA_STATED = re.compile(r"JSON Schema[^\n]*\n")
_FORMAT_SAMPLES = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "00:00:00Z",
    "duration": "P1D",
    "email": "demo@example.com",
    "idn-email": "demo@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "iri": "https://example.com/",
    "iri-reference": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "json-pointer": "",
    "relative-json-pointer": "0",
    "regex": ".*",
}
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
# What a plain `json_object` response format gets: somewhere to put the answer.
_ANY_OBJECT = {"type": "object", "properties": {"answer": {"type": "string"}}}


def requested_schema(
    messages: list[dict[str, Any]], response_format: object
) -> dict[str, Any] | bool | None:
    """The JSON Schema the request asks the answer to match, or None when it asks for none."""
    if isinstance(response_format, dict):
        if response_format.get("type") == "json_schema":
            spec = response_format.get("json_schema") or {}
            schema = spec.get("schema") if isinstance(spec, dict) else None
            if isinstance(schema, dict | bool):
                return schema
        if response_format.get("type") == "json_object":
            return _ANY_OBJECT
    for message in reversed(messages):
        if message.get("role") != "system" or not isinstance(message.get("content"), str):
            continue
        text = message["content"]
        for stated in reversed(list(_SCHEMA_STATED.finditer(text))):
            try:
                schema, _ = json.JSONDecoder().raw_decode(text, stated.end())
            except json.JSONDecodeError:
                continue
            if isinstance(schema, dict):
                return schema
    return None


def shaped_answer(schema: dict[str, Any] | bool, text: str, number: int | float | None) -> str:
    """The answer (`text`, and `number` when it is a result) as JSON matching `schema`."""
    root = schema if isinstance(schema, dict) else {}
    return json.dumps(_Filler(root, text, number).value(schema, 0), ensure_ascii=False)


class _Filler:
    """Builds one value; remembers whether the answer's text and number are placed yet."""

    def __init__(self, root: dict[str, Any], text: str, number: int | float | None) -> None:
        self._root = root
        self._text: str | None = text
        self._number = number

    def value(self, schema: object, depth: int) -> Any:
        if depth > _MAX_DEPTH or schema is False:
            return None
        if not isinstance(schema, dict):  # `true`: anything
            return self._place_text() if self._text is not None else None
        schema = self._resolved(schema, depth)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self._enum(schema)
        kind = self._kind(schema)
        if kind == "object":
            return self._object(schema, depth)
        if kind == "array":
            return self._array(schema, depth)
        if kind in ("integer", "number"):
            return self._numeric(schema, integer=kind == "integer")
        if kind == "string":
            return self._string(schema)
        if kind == "boolean":
            return schema.get("default", False) is True
        if kind is None and self._text is not None:
            return self._place_text()
        return None

    def _resolved(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        """`schema` with its `$ref` followed, `allOf` merged in and one `anyOf`/`oneOf`
        branch chosen: the first that takes the answer, else the first that is not null."""
        for _ in range(_MAX_DEPTH - depth):
            ref = schema.get("$ref")
            if isinstance(ref, str):
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                schema = {**_pointed(self._root, ref), **rest}
                continue
            parts = schema.get("allOf")
            if isinstance(parts, list):
                merged = {k: v for k, v in schema.items() if k != "allOf"}
                for part in parts:
                    if isinstance(part, dict):
                        merged = _merged(merged, self._resolved(part, depth + 1))
                schema = merged
                continue
            for keyword in ("anyOf", "oneOf"):
                branches = schema.get(keyword)
                if isinstance(branches, list) and branches:
                    rest = {k: v for k, v in schema.items() if k != keyword}
                    options = [
                        self._resolved(b, depth + 1) for b in branches if isinstance(b, dict)
                    ]
                    schema = _merged(rest, self._branch(options))
                    break
            else:
                return schema
        return schema

    def _branch(self, options: list[dict[str, Any]]) -> dict[str, Any]:
        for option in options:
            if self._takes_answer(option):
                return option
        return next((o for o in options if o.get("type") != "null"), options[0] if options else {})

    def _kind(self, schema: dict[str, Any]) -> str | None:
        declared = schema.get("type")
        if isinstance(declared, str):
            return declared
        if isinstance(declared, list) and declared:
            text = self._text
            if text is not None and "string" in declared and _takes_text(schema, text):
                return "string"
            number = self._number
            for numeric in ("number", "integer"):
                if (
                    numeric in declared
                    and number is not None
                    and _takes_number(schema, number, integer=numeric == "integer")
                ):
                    return numeric
            # Nothing of the answer to put here: nothing, where the schema allows it.
            return "null" if "null" in declared else str(declared[0])
        if "properties" in schema or "required" in schema:
            return "object"
        if "items" in schema or "prefixItems" in schema:
            return "array"
        if any(keyword in schema for keyword in _NUMBER_KEYWORDS):
            return "number"
        if any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
            return "string"
        return None

    def _takes_answer(self, schema: dict[str, Any]) -> bool:
        """Whether the answer's text or number fits this (resolved) schema as it stands."""
        if "const" in schema or "enum" in schema:
            return False
        declared = schema.get("type")
        types = declared if isinstance(declared, list) else [declared]
        text = self._text
        if text is not None and "string" in types and _takes_text(schema, text):
            return True
        number = self._number
        return number is not None and any(
            t in types and _takes_number(schema, number, integer=t == "integer")
            for t in ("number", "integer")
        )

    def _enum(self, schema: dict[str, Any]) -> Any:
        options = schema["enum"]
        if self._text is not None and self._text in options:
            return self._place_text()
        if self._number is not None and self._number in options:
            number, self._number = self._number, None
            return number
        if "default" in schema and schema["default"] in options:
            return schema["default"]
        return options[0] if options else None

    def _object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = [name for name in schema.get("required") or [] if isinstance(name, str)]
        built: dict[str, Any] = {}
        for name, sub in properties.items():
            if name in required or (
                isinstance(sub, dict) and self._takes_answer(self._resolved(sub, depth + 1))
            ):
                built[name] = self.value(sub, depth + 1)
        extra = schema.get("additionalProperties", {})
        for name in required:
            if name not in built:
                built[name] = self.value(extra if isinstance(extra, dict) else {}, depth + 1)
        wanted = schema.get("minProperties", 0)
        for name, sub in properties.items():
            if len(built) >= min(wanted, _MAX_ITEMS):
                break
            if name not in built:
                built[name] = self.value(sub, depth + 1)
        return built

    def _array(self, schema: dict[str, Any], depth: int) -> list[Any]:
        prefix = schema.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        items = schema.get("items", {})
        count = max(int(schema.get("minItems", 0)), len(prefix), 1)
        if isinstance(schema.get("maxItems"), int):
            count = min(count, schema["maxItems"])
        if items is False:
            count = min(count, len(prefix))
        built = [
            self.value(prefix[i] if i < len(prefix) else items, depth + 1)
            for i in range(min(count, _MAX_ITEMS))
        ]
        if schema.get("uniqueItems") and len({json.dumps(v, sort_keys=True) for v in built}) < len(
            built
        ):
            built = [_distinct(value, index) for index, value in enumerate(built)]
        return built

    def _numeric(self, schema: dict[str, Any], *, integer: bool) -> int | float:
        number = self._number
        if number is not None and _takes_number(schema, number, integer=integer):
            self._number = None
            return number
        for candidate in [schema.get("default"), *(schema.get("examples") or [])]:
            if _is_number(candidate) and _takes_number(schema, candidate, integer=integer):
                return candidate  # type: ignore[no-any-return]
        return _least(schema, integer=integer)

    def _string(self, schema: dict[str, Any]) -> str:
        if self._text is not None and _takes_text(schema, self._text):
            return _clipped(self._place_text(), schema)
        for candidate in [schema.get("default"), *(schema.get("examples") or [])]:
            if isinstance(candidate, str):
                return candidate
        sample = _FORMAT_SAMPLES.get(str(schema.get("format")))
        if sample is not None:
            return sample
        wanted = min(int(schema.get("minLength", 0)), _MAX_CHARS)
        return "x" * wanted

    def _place_text(self) -> str:
        text, self._text = self._text or "", None
        return text


def _takes_text(schema: dict[str, Any], text: str) -> bool:
    """Whether `text` may go into a string of this schema: one with no format, pattern, enum
    or const to meet, that asks for no more than it has (a longer one is cut short)."""
    if any(k in schema for k in ("format", "pattern", "enum", "const")):
        return False
    least = schema.get("minLength", 0)
    return not _is_number(least) or len(text) >= least


def _takes_number(schema: dict[str, Any], number: int | float, *, integer: bool) -> bool:
    if "const" in schema or "enum" in schema:
        return False
    if integer and not float(number).is_integer():
        return False
    low, above = _bound(schema, "minimum"), _bound(schema, "exclusiveMinimum")
    high, below = _bound(schema, "maximum"), _bound(schema, "exclusiveMaximum")
    step = _bound(schema, "multipleOf")
    return (
        (low is None or number >= low)
        and (above is None or number > above)
        and (high is None or number <= high)
        and (below is None or number < below)
        and (step is None or (step > 0 and float(number / step).is_integer()))
    )


def _least(schema: dict[str, Any], *, integer: bool) -> int | float:
    """The value nearest 0 that the bounds allow (a multiple of `multipleOf` where asked)."""
    low, above = _bound(schema, "minimum"), _bound(schema, "exclusiveMinimum")
    high, below = _bound(schema, "maximum"), _bound(schema, "exclusiveMaximum")
    floor = low if low is not None else above
    ceiling = high if high is not None else below
    value: float = 0
    if low is not None and value < low:
        value = math.ceil(low) if integer else low
    if above is not None and value <= above:
        value = math.floor(above) + 1 if integer or ceiling is None else (above + ceiling) / 2
    if high is not None and value > high:
        value = math.floor(high) if integer else high
    if below is not None and value >= below:
        value = math.ceil(below) - 1 if integer or floor is None else (floor + below) / 2
    step = _bound(schema, "multipleOf")
    if step is not None and step > 0:
        value = math.ceil(value / step) * step
    return int(value) if integer or float(value).is_integer() else value


def _bound(schema: dict[str, Any], keyword: str) -> float | None:
    value = schema.get(keyword)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _clipped(text: str, schema: dict[str, Any]) -> str:
    limit = schema.get("maxLength")
    if isinstance(limit, int) and len(text) > limit:
        return text[: limit - 1] + "…" if limit > 0 else ""
    return text


def _distinct(value: Any, index: int) -> Any:
    """Items made different from one another, for `uniqueItems` (best effort)."""
    if isinstance(value, str):
        return f"{value} {index + 1}".strip()
    if _is_number(value):
        return value + index
    return value


def _pointed(root: dict[str, Any], ref: str) -> dict[str, Any]:
    """The part of the schema a local `$ref` (`#/$defs/name`) points at; {} for any other."""
    if not ref.startswith("#"):
        return {}
    target: Any = root
    for token in ref[1:].split("/")[1:]:
        key = token.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and key in target:
            target = target[key]
        elif isinstance(target, list) and key.isdigit() and int(key) < len(target):
            target = target[int(key)]
        else:
            return {}
    return target if isinstance(target, dict) else {}


def _merged(base: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """Two schemas' keywords as one: properties and required lists combined."""
    merged = {**base, **part}
    properties = {**(base.get("properties") or {}), **(part.get("properties") or {})}
    if properties:
        merged["properties"] = properties
    required = [*(base.get("required") or []), *(part.get("required") or [])]
    if required:
        merged["required"] = list(dict.fromkeys(required))
    return merged


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
