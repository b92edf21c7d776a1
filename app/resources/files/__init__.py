"""A tenant's files: uploads known by their bytes, their text extracted for reading and
search, the library runs read them from, and the service that lets callers see and change
those they may."""

from app.resources.files.library import (
    BINARY,
    IMAGE_TYPES,
    PDF,
    TEXT,
    FileLibrary,
)

__all__ = ["BINARY", "IMAGE_TYPES", "PDF", "TEXT", "FileLibrary"]
