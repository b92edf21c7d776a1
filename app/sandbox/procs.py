"""The host's processes of one user: a sandbox's, each sandbox running as a user of its own."""

import contextlib
import os
from collections.abc import Iterator


def processes_of(uid: int) -> Iterator[int]:
    """The ids of the host user's processes now (one that ends meanwhile may be among them)."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{name}").st_uid == uid:
                    yield int(name)
