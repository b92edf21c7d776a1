"""Prompt tokens as LiteLLM's `token_counter` counts them, without LiteLLM: for the messages
and tools an OpenAI-compatible request carries (text, tool calls, function tools).

LiteLLM counts with OpenAI's tokenizers (tiktoken's encodings, from the files it ships: this
service never downloads a tokenizer), chosen by model: `o200k_base` for the GPT-4o family,
the model's own encoding for the other OpenAI chat models it knows, `cl100k_base` for every
other name (a self-hosted model, or any `openai/...` name: every model called directly).
Only `cl100k_base` is counted here: LiteLLM loads that one as it is imported and shares it
(tiktoken keeps one of each), where another (`o200k_base` is 67 MB) would be a second copy of
what LiteLLM loads for the same model. Each message costs 3 tokens and
the count of each of its strings (a name 1 more); a tool call counts its arguments; a request
with tools counts their definitions as the TypeScript-like namespace OpenAI is understood to
render them in, and 9 more (4 fewer with a system message); every prompt 3 for the reply's
priming. Text is encoded in 1,024-character pieces, as LiteLLM does (a run of one character
would otherwise cost quadratic time); past 4,000,000 characters LiteLLM estimates from samples.

What this does not count (another encoding's models; image, file or document parts, search
results, tools in other providers' formats) it says so (`NotCounted`), and LiteLLM counts it.
`tests/llm/test_counting.py` holds the two counts equal.
"""

import functools
import importlib
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from app.errors import OmniForgeError
from app.llm.model_map import TOKENIZERS_DIR, openai_chat_models, package_dir

TOKENS_PER_MESSAGE = 3
REPLY_PRIMING = 3
_CHUNK_CHARS = 1024
# Past this LiteLLM extrapolates from samples of the text: it counts such a text itself.
_MAX_EXACT_CHARS = 4_000_000
# LiteLLM's renames: Azure's names of OpenAI's models.
_AZURE_NAMES = frozenset(
    {"gpt-35-turbo", "gpt-35-turbo-16k", "gpt-35-turbo-instruct"}
    | {"azure/gpt-41", "azure/gpt-41-mini", "azure/gpt-41-nano"}
)
_LEGACY_MODEL = "gpt-3.5-turbo-0301"  # 4 tokens per message, a name 1 fewer
_TOOL_DEFINITIONS = 9
_TOOLS_WITH_SYSTEM = -4


class NotCounted(OmniForgeError):
    """What this module does not count: LiteLLM counts it."""


def prepare(models: Iterable[str]) -> None:
    """Loads what counting for `models` needs (their names' list, the encoding: a tenth of a
    second), so that no run's first count waits for it."""
    for model in models:
        _counter(model)


def count_message(model: str, message: Mapping[str, Any]) -> int:
    """A message's tokens, the reply's priming aside. Raises `NotCounted`."""
    legacy = _accounting_model(model) == _LEGACY_MODEL
    count = _count_function(model)
    total = 4 if legacy else TOKENS_PER_MESSAGE
    for key, value in message.items():
        if value is None:
            continue
        if key == "tool_calls":
            total += _tool_calls(value, count)
        elif key == "function_call":
            if not isinstance(value, Mapping):
                raise NotCounted
            total += count(str(value.get("arguments", "")))
        elif isinstance(value, str):
            total += count(value)
            if key == "name":
                total += -1 if legacy else 1
        elif key == "content" and isinstance(value, list):
            total += _parts(value, count)
        elif key == "search_results":
            raise NotCounted
    return total


def count_text(model: str, text: str) -> int:
    """A text's tokens (`token_counter(text=...)`). Raises `NotCounted`."""
    return _count_function(model)(text)


def count_tool_definitions(model: str, tools: list[dict[str, Any]]) -> int:
    """What a request's (non-empty) tools add, before the system message's discount
    (`tools_discount`). Raises `NotCounted`."""
    return _count_function(model)(_namespace(tools)) + _TOOL_DEFINITIONS


def tools_discount(messages: Any) -> int:
    """What tools cost less when the prompt has a system message."""
    has_system = any(message.get("role") == "system" for message in messages)
    return _TOOLS_WITH_SYSTEM if has_system else 0


def _tool_calls(value: Any, count: Callable[[str], int]) -> int:
    if not isinstance(value, list):
        raise NotCounted
    total = 0
    for call in value:
        if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
            raise NotCounted
        total += count(str(call["function"].get("arguments", "")))
    return total


def _parts(parts: list[Any], count: Callable[[str], int]) -> int:
    total = 0
    for part in parts:
        if isinstance(part, str):
            total += count(part)
        elif isinstance(part, Mapping) and part.get("type") == "text":
            total += count(str(part.get("text", "")))
        else:
            raise NotCounted
    return total


def _count_function(model: str) -> Callable[[str], int]:
    count = _counter(model)
    if count is None:
        raise NotCounted
    return count


def _accounting_model(model: str) -> str:
    """The name LiteLLM counts a model's messages as."""
    if model in _AZURE_NAMES:
        return model.replace("-35", "-3.5")
    if model in openai_chat_models():
        return model
    return "gpt-3.5-turbo"


def _encoding_name(model: str) -> str:
    import tiktoken

    name = _accounting_model(model)
    if "gpt-4o" in name:
        return "o200k_base"
    try:
        return tiktoken.encoding_name_for_model(name)
    except KeyError:
        return "cl100k_base"


@functools.cache
def _encoder() -> Callable[[str], list[int]]:
    """`cl100k_base`'s `encode_ordinary`: tiktoken's shared encoding once LiteLLM (which loads
    it) is imported; else the tokenizer alone, without the 17 MB of Python objects tiktoken's
    encoding keeps of its merges beside it (for what this does not use)."""
    # The encodings LiteLLM ships, where tiktoken looks for them (as LiteLLM points it).
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(package_dir() / TOKENIZERS_DIR))
    import tiktoken

    if "litellm" in sys.modules:
        encode: Callable[[str], list[int]] = tiktoken.get_encoding(_ENCODING).encode_ordinary
        return encode
    # tiktoken's own constructor of the encoding's tables, and its tokenizer (untyped)
    spec = importlib.import_module("tiktoken_ext.openai_public").cl100k_base()
    core_bpe = importlib.import_module("tiktoken._tiktoken").CoreBPE
    core = core_bpe(spec["mergeable_ranks"], spec["special_tokens"], spec["pat_str"])

    def encode_ordinary(text: str) -> list[int]:
        try:
            tokens: list[int] = core.encode_ordinary(text)
        except UnicodeEncodeError:  # lone surrogates: replaced, as tiktoken's encoding does
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            tokens = core.encode_ordinary(text)
        return tokens

    return encode_ordinary


_ENCODING = "cl100k_base"


@functools.cache
def _counter(model: str) -> Callable[[str], int] | None:
    if _encoding_name(model) != _ENCODING:
        return None
    encode = _encoder()

    def count(text: str) -> int:
        if len(text) <= _CHUNK_CHARS:
            return len(encode(text))
        if len(text) > _MAX_EXACT_CHARS:
            raise NotCounted
        return sum(
            len(encode(text[start : start + _CHUNK_CHARS]))
            for start in range(0, len(text), _CHUNK_CHARS)
        )

    return count


def _namespace(tools: list[dict[str, Any]]) -> str:
    lines = ["namespace functions {", ""]
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping):
            raise NotCounted  # another provider's format
        name = function.get("name")
        if not name:
            continue
        description = function.get("description")
        comment = [f"// {description}"] if description else []
        parameters = function.get("parameters") or {}
        if not isinstance(parameters, Mapping):
            parameters = {}
        properties = parameters.get("properties")
        if isinstance(properties, Mapping) and properties:
            lines += [
                *comment,
                f"type {name} = (_: {{",
                _object(parameters, 0),
                "}) => any;",
                "",
            ]
        else:
            lines += [*comment, f"type {name} = () => any;", ""]
    lines.append("} // namespace functions")
    return "\n".join(lines)


def _object(schema: Mapping[str, Any], indent: int) -> str:
    properties = schema.get("properties")
    if not properties:
        return ""
    if not isinstance(properties, Mapping):
        raise NotCounted
    required = schema.get("required", [])
    lines = []
    for key, property_schema in properties.items():
        if not isinstance(property_schema, Mapping):
            raise NotCounted
        if description := property_schema.get("description"):
            lines.append(f"// {description}")
        optional = "" if required and key in required else "?"
        lines.append(f"{key}{optional}: {_type(property_schema, indent)},")
    return "\n".join(" " * indent + line for line in lines)


def _type(schema: Mapping[str, Any], indent: int) -> str:
    kind = schema.get("type")
    if kind == "string" or kind in ("integer", "number"):
        if "enum" in schema:
            return " | ".join(f'"{item}"' for item in schema["enum"])
        return "string" if kind == "string" else "number"
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, Mapping):
            raise NotCounted
        return f"{_type(items, indent)}[]"
    if kind == "object":
        return f"{{\n{_object(schema, indent + 2)}\n}}"
    if kind in ("boolean", "null"):
        return str(kind)
    return "any"
