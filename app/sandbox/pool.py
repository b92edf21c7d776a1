"""The live sandboxes of a process, by key (a workspace's): started on first use (restored from
their last snapshot when they have one), each under a host user of its own, stopped when idle
for `idle_s`, when asked, or when the process stops. A user is locked (a file lock, which its
process's end releases) by the pool that runs a sandbox as it, so that processes sharing a host
never share a user; what a stopped sandbox ran is killed before its user is reused."""

import asyncio
import fcntl
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from app.errors import OmniForgeError
from app.sandbox.bubblewrap import SandboxHost, SandboxLimits
from app.sandbox.live import LiveSandbox, kill_user

Restore = Callable[[], Awaitable[bytes | None]]


class SandboxesBusy(OmniForgeError):
    """As many sandboxes are live as the process allows (`max_live`), none of them idle."""


@dataclass(slots=True)
class _Entry:
    key: str
    owner: str
    sandbox: LiveSandbox
    started_at: float
    used_at: float
    idle: asyncio.TimerHandle | None = None
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LiveInfo:
    """A live sandbox as its listing shows it."""

    key: str
    owner: str
    uid: int
    started_s_ago: float
    idle_s: float
    calls: int
    cpu_s: float
    labels: dict[str, str]


class SandboxPool:
    def __init__(
        self,
        host: SandboxHost,
        *,
        max_live: int = 64,
        idle_s: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.host = host
        self.max_live = max_live
        self.idle_s = idle_s
        self._clock = clock
        self._live: dict[str, _Entry] = {}
        self._starting: dict[str, asyncio.Lock] = {}
        self._uids = deque(range(host.first_uid, host.first_uid + host.uids))
        self._locks: dict[int, int] = {}  # uid -> the descriptor holding its lock
        os.makedirs(host.locks, mode=0o700, exist_ok=True)

    def __len__(self) -> int:
        return len(self._live)

    async def get(
        self,
        key: str,
        limits: SandboxLimits,
        *,
        owner: str,
        restore: Restore | None = None,
        labels: dict[str, str] | None = None,
    ) -> tuple[LiveSandbox, bool]:
        """The live sandbox of `key` (one of `owner`'s), started if there is none (and its
        workspace restored from what `restore` gives); whether it was started now."""
        entry = self._live.get(key)
        if entry is not None and entry.owner == owner and entry.sandbox.alive:
            self._used(entry)
            return entry.sandbox, False
        lock = self._starting.setdefault(key, asyncio.Lock())
        async with lock:
            entry = self._live.get(key)
            if entry is not None and entry.sandbox.alive and entry.owner == owner:
                self._used(entry)
                return entry.sandbox, False
            if entry is not None:  # dead, or another owner's key: never shared
                await self.stop(key)
            sandbox = await self._start(limits)
            try:
                archive = None if restore is None else await restore()
                if archive:
                    await sandbox.unpack(archive)
            except BaseException:
                await self._release(sandbox)
                raise
            now = self._clock()
            entry = _Entry(key, owner, sandbox, now, now, labels=dict(labels or {}))
            self._live[key] = entry
            self._used(entry)
            return sandbox, True

    def live(self, owner: str | None = None) -> list[LiveInfo]:
        now = self._clock()
        return [
            LiveInfo(
                entry.key,
                entry.owner,
                entry.sandbox.uid,
                round(now - entry.started_at, 3),
                round(now - entry.used_at, 3),
                entry.sandbox.calls,
                round(entry.sandbox.cpu_seconds(), 3),
                dict(entry.labels),
            )
            for entry in self._live.values()
            if owner is None or entry.owner == owner
        ]

    async def stop(self, key: str) -> bool:
        """Stops the sandbox of `key`; whether there was one."""
        entry = self._live.pop(key, None)
        if entry is None:
            return False
        if entry.idle is not None:
            entry.idle.cancel()
        await self._release(entry.sandbox)
        return True

    async def stop_where(self, test: Callable[[LiveInfo], bool]) -> int:
        """Stops every sandbox `test` picks; how many."""
        keys = [info.key for info in self.live() if test(info)]
        stopped = await asyncio.gather(*(self.stop(key) for key in keys))
        return sum(stopped)

    async def close(self) -> None:
        await asyncio.gather(*(self.stop(key) for key in list(self._live)))

    async def _start(self, limits: SandboxLimits) -> LiveSandbox:
        if len(self._live) >= self.max_live:
            resting = [entry for entry in self._live.values() if not entry.sandbox.busy]
            if not resting:
                raise SandboxesBusy(f"{self.max_live} sandboxes are live, all in use")
            # The least recently used makes room (its workspace's snapshot restores it).
            await self.stop(min(resting, key=lambda entry: entry.used_at).key)
        uid = self._claim_uid()
        sandbox = LiveSandbox(self.host, limits, uid)
        try:
            await sandbox.start()
        except BaseException:
            await self._release(sandbox)
            raise
        return sandbox

    def _claim_uid(self) -> int:
        """A host user no other sandbox on this host has (this process's or another's): one
        whose lock file this process could lock. A process that ends, however it ends,
        leaves its users' locks; whatever of theirs still runs is killed before reuse."""
        for _ in range(len(self._uids)):
            uid = self._uids.popleft()
            path = os.path.join(self.host.locks, f"{uid}.lock")
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(descriptor)
                self._uids.append(uid)
                continue
            self._locks[uid] = descriptor
            kill_user(uid)  # a crashed process's sandbox under this user
            return uid
        raise SandboxesBusy("no host user is free for another sandbox")

    async def _release(self, sandbox: LiveSandbox) -> None:
        await sandbox.close()
        kill_user(sandbox.uid)  # what escaped its namespace, if anything ever does
        descriptor = self._locks.pop(sandbox.uid, None)
        if descriptor is not None:
            os.close(descriptor)  # and with it the lock
        self._uids.append(sandbox.uid)

    def _used(self, entry: _Entry) -> None:
        entry.used_at = self._clock()
        if entry.idle is not None:
            entry.idle.cancel()
        loop = asyncio.get_running_loop()
        entry.idle = loop.call_later(self.idle_s, self._expire, entry)

    def _expire(self, entry: _Entry) -> None:
        if entry.sandbox.busy:  # a call longer than the idle time: idle after it
            self._used(entry)
            return
        if self._live.get(entry.key) is entry:
            task = asyncio.get_running_loop().create_task(self.stop(entry.key))
            task.add_done_callback(lambda done: done.exception())
