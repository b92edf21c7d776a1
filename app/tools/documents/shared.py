"""The process's document reader. The service installs one built from its settings when it
starts; the places that read documents are plain functions run in worker threads (a file's
sniffing, a fetched body's reading), so they reach it here rather than through arguments.
Code that reads a document with none installed (a script, a test) gets one with the default
limits, stopped when the process exits."""

import atexit
import threading
from collections.abc import Callable

from app.tools.documents.limits import DocumentLimits
from app.tools.documents.reader import DocumentReader

_lock = threading.Lock()
# Installed readers, newest last; and the one made on demand when none is.
_installed: list[DocumentReader] = []
_fallback: list[DocumentReader] = []


def install(reader: DocumentReader) -> Callable[[], None]:
    """Makes `reader` the current one until the returned function is called (which also
    stops it)."""
    with _lock:
        _installed.append(reader)

    def uninstall() -> None:
        with _lock:
            if reader in _installed:
                _installed.remove(reader)
        reader.close()

    return uninstall


def current() -> DocumentReader:
    with _lock:
        live = [reader for reader in _installed if not reader.closed]
        if live:
            return live[-1]
        if not _fallback:
            reader = DocumentReader(DocumentLimits())
            _fallback.append(reader)
            atexit.register(reader.close)
        return _fallback[0]
