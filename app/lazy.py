"""Names a package exports but imports on first use (PEP 562): a package whose few heavy
modules (LiteLLM, the Redis client, httpx) most of its importers never need. Used by every
layer, so it imports nothing of ours."""

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_attributes(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports each name of `modules` from the
    module it names the first time it is asked for."""

    def attribute(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(module), name)

    return attribute
