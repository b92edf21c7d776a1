"""Text a database cannot hold, made storable in one documented way, the same on every backend.

Models and tools may write anything; the databases refuse two things:

- U+0000 (NUL): Postgres refuses it in `text` and `jsonb` (SQLite would keep it). It is stored
  as U+2400 SYMBOL FOR NULL (`␀`), which says what was there.
- Lone surrogates (U+D800–U+DFFF not forming a pair): no UTF-8 encoder writes them (asyncpg,
  aiosqlite, pydantic's JSON). Each is stored as U+FFFD REPLACEMENT CHARACTER (`�`).

Everything else is stored as it came. Requests are stricter: text a client sends is refused
with 422 if it holds either (the API's input check), so only what models and tools produce is
ever replaced here. Replacement is idempotent, so text may pass through here more than once.
"""

import math
import re
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

NUL_STAND_IN = "\u2400"
SURROGATE_STAND_IN = "\ufffd"

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# In JSON text: a `\u0000` escape, or a surrogate escape that is not part of a valid pair,
# preceded by an odd number of backslashes (an even number is a literal backslash before "u").
_UNSTORABLE_ESCAPE = re.compile(
    r"(?<!\\)((?:\\\\)*)\\u("
    r"0000"
    r"|[dD][89abAB][0-9a-fA-F]{2}(?:\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
    r"|[dD][c-fC-F][0-9a-fA-F]{2}"
    r")"
)


def _stand_in(char: str) -> str:
    return NUL_STAND_IN if char == "\x00" else SURROGATE_STAND_IN


def _escape_stand_in(match: re.Match[str]) -> str:
    code = match[2]
    if len(code) == 10:  # a high surrogate with its low one: a valid pair, kept
        return match[0]
    stand_in = NUL_STAND_IN if code == "0000" else SURROGATE_STAND_IN
    return f"{match[1]}{stand_in}"


def has_surrogates(text: str) -> bool:
    """Whether `text` holds a surrogate code point (in a Python string, always a lone one)."""
    if text.isascii():  # known without a scan
        return False
    try:
        text.encode("utf-8")  # a C loop, far faster than a regular expression
    except UnicodeEncodeError:
        return True
    return False


def storable(text: str) -> str:
    """`text` with NUL and lone surrogates replaced (see the module's docstring)."""
    if "\x00" not in text and not has_surrogates(text):
        return text
    return _UNSTORABLE.sub(lambda m: _stand_in(m[0]), text)


def storable_json(text: str) -> str:
    """JSON text whose strings are `storable`: escapes the databases refuse are replaced, and
    so are raw NUL or surrogate characters."""
    if "\\u" in text:
        text = _UNSTORABLE_ESCAPE.sub(_escape_stand_in, text)
    return storable(text)


def storable_value(value: Any) -> Any:
    """A JSON-like value with every string (keys included) `storable`, and non-finite floats
    as null (as pydantic writes them)."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {storable_value(k): storable_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable_value(item) for item in value]
    return value


def dump_model(model: BaseModel) -> str:
    """A model's JSON, storable. Pydantic cannot encode lone surrogates at all: such a model
    is dumped to Python values, replaced there and validated again (the rare, slower path)."""
    try:
        return storable_json(model.model_dump_json())
    except PydanticSerializationError:
        values = storable_value(model.model_dump(round_trip=True))
        return storable_json(type(model).model_validate(values).model_dump_json())
