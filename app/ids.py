"""Random (version 4) UUIDs, their randomness read from the OS a page at a time.

`uuid.uuid4()` makes a system call per id (`os.urandom(16)`); a task makes dozens of ids (its
steps, calls, events, grants), and those calls were about 2 % of the service's CPU per task.
The bytes are the same kernel CSPRNG's, taken 4 KiB at a time; a forked child starts a page of
its own, so that no two processes hand out the same ids.
"""

import os
import threading
from uuid import UUID

_PAGE = 4096
_lock = threading.Lock()
_page = b""
_offset = 0


def uuid4() -> UUID:
    global _page, _offset
    with _lock:
        if _offset >= len(_page):
            _page, _offset = os.urandom(_PAGE), 0
        chunk = _page[_offset : _offset + 16]
        _offset += 16
    return UUID(bytes=chunk, version=4)


def _forget_page() -> None:
    global _page, _offset
    _page, _offset = b"", 0


os.register_at_fork(after_in_child=_forget_page)
