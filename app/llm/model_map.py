"""LiteLLM's model map (prices, context windows, capabilities, providers), read from the file
LiteLLM ships and reads itself offline, without importing LiteLLM (about 160 MB and seconds
of CPU): what a process that calls only OpenAI-compatible servers directly needs of it.

The file is parsed once, when first needed; what is kept of it is small (the names asked
for), not the map's few thousand entries.
"""

import functools
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

MAP_FILE = "model_prices_and_context_window_backup.json"
TOKENIZERS_DIR = "litellm_core_utils/tokenizers"


def package_dir() -> Path:
    """Where LiteLLM is installed (found, not imported)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("LiteLLM is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _read() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((package_dir() / MAP_FILE).read_text(encoding="utf-8"))
    loaded.pop("sample_spec", None)
    return loaded


@functools.cache
def openai_chat_models() -> frozenset[str]:
    """The names LiteLLM knows as OpenAI's chat models (its `open_ai_chat_completion_models`:
    the map's `openai` entries, fine-tuned models' price entries aside): LiteLLM's own set
    once it is imported, else read from the map (50 ms of CPU)."""
    loaded = sys.modules.get("litellm")
    known = getattr(loaded, "open_ai_chat_completion_models", None)
    if isinstance(known, set):
        return frozenset(known)
    return chat_models_in_map()


def chat_models_in_map() -> frozenset[str]:
    """`openai_chat_models`, read from the map."""
    return frozenset(
        name
        for name, entry in _read().items()
        if isinstance(entry, dict)
        and entry.get("litellm_provider") == "openai"
        and not (name.startswith("ft:") and name.count(":") <= 1)
    )


@functools.cache
def _names() -> frozenset[str]:
    """Every name the map file prices or describes, with each name's last path segment (the
    file's: LiteLLM's map in memory also holds what model lists registered in it)."""
    keys = set(_read())
    return frozenset(keys | {key.rsplit("/", 1)[-1] for key in keys})


def knows(model: str) -> bool:
    """Whether LiteLLM's map may describe `model` (a provider's path or not): by its name, or
    its name's last segment; a model it does not know is described by its model list entry
    alone."""
    names = _names()
    return model in names or model.rsplit("/", 1)[-1] in names
