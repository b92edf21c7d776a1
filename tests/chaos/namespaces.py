"""An instance in a PID namespace of its own: `unshare --pid --fork --mount-proc` runs
`python -m app.cli serve` as pid 1 of a new namespace, on this host's network and with its
hostname. Two of them have the same hostname and the same pid, as two containers on one node's
network (and with its name) have."""

import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from tests.cluster import Instance


@dataclass
class NamespacedInstance(Instance):
    """`Instance` started through `unshare`. Signals go to the server itself (the process
    `unshare` forked): `unshare` ignores SIGTERM while it waits, and with `--kill-child` it
    takes the server with it should it be killed itself. As pid 1 the server ignores the
    SIGTERM it raises again on itself once shut down, so `terminate()` returns 0, not -15."""

    def command(self) -> list[str]:
        unshare = shutil.which("unshare")
        if unshare is None:
            raise AssertionError("no unshare (util-linux): needed for a PID namespace")
        # Without root, a user namespace of its own grants the right to make the others.
        as_user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        pid_namespace = ["--pid", "--fork", "--mount-proc", "--kill-child"]
        return [unshare, *as_user, *pid_namespace, *super().command()]

    def server_pid(self) -> int | None:
        """The server's pid as this host sees it (it is 1 in its own namespace); None once
        it is gone."""
        assert self.process is not None
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            pids = children.read_text().split()
        except FileNotFoundError:
            return None
        return int(pids[0]) if len(pids) == 1 else None

    async def _end(self, sig: signal.Signals) -> int:
        process = self.process
        if process is None:
            return 0
        if process.returncode is not None:
            return process.returncode
        server = self.server_pid()
        if server is not None:
            try:
                os.kill(server, sig)
            except ProcessLookupError:
                server = None
        if server is None:
            process.kill()  # the server is gone: unshare ends with it, or now
        code = await process.wait()
        if self._drain is not None:
            await self._drain
        return code
