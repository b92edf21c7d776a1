"""What the settings' sections share: list settings written as comma-separated values, and
text the service makes once and keeps in its data dir."""

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel
from pydantic_settings import NoDecode

# At run time a section is a plain class: `Settings` takes its fields and validators (pydantic
# reads them from every base) and builds the one schema. As a model of its own, each section
# would be collected and checked again when the settings are imported. Type checkers see the
# model, so that `Settings(...)` takes every section's fields.
if TYPE_CHECKING:
    _SectionBase = BaseModel
else:
    _SectionBase = object


class Section(_SectionBase):
    """A section of the settings: some of `Settings`' fields and what checks them together."""


CommaList = Annotated[list[str], NoDecode]
"""A list setting written as comma-separated values (`a,b,c`) in its environment variable;
its section's validator splits it with `comma_separated`."""


def comma_separated(value: object) -> object:
    """The items of a `CommaList` given as text, stripped, empty ones left out."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def kept_in(path: Path, make: Callable[[], str]) -> str:
    """The text kept in `path`, made by `make` the first time. Written whole to a private
    temporary file, then linked into place atomically: never readable by others, never
    half-written; of two processes starting at once, one wins and both read its text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(make())
            with contextlib.suppress(FileExistsError):
                os.link(temporary, path)
        finally:
            os.unlink(temporary)
    return path.read_text(encoding="utf-8").strip()
