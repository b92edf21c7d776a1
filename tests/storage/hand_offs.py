"""Counting the embedded database's hand-offs to its connection's thread."""

from collections.abc import Callable
from typing import Any

import aiosqlite
import pytest


class HandOffs:
    """Counts the calls queued to the connections' threads (each still made)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        queue: Callable[..., Any] = aiosqlite.Connection._execute

        async def counted(connection: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return await queue(connection, fn, *args, **kwargs)

        monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
