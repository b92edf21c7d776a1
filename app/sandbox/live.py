"""A live sandbox: its process tree, the calls made to its agent one at a time, what it used."""

import asyncio
import base64
import contextlib
import itertools
import json
import os
import signal
from typing import Any

from app.sandbox import cgroups
from app.sandbox.bubblewrap import (
    Execution,
    OnOutput,
    SandboxFailed,
    SandboxHost,
    SandboxLimits,
    stopped_by,
)
from app.sandbox.procs import processes_of

_TICKS = os.sysconf("SC_CLK_TCK")
# How long past a call's own wall-time limit the agent may take to answer before the
# sandbox is taken for dead and killed.
_GRACE_S = 5.0
_LINE_SLACK = 1 << 20
_ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def kill_user(uid: int, *, sparing: int | None = None) -> None:
    """Kills every process of a host user (`sparing` one)."""
    for pid in processes_of(uid):
        if pid != sparing:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


class LiveSandbox:
    """One sandbox, started by `start`, stopped by `close` (or when the service exits: its
    processes die with their parent)."""

    def __init__(self, host: SandboxHost, limits: SandboxLimits, uid: int) -> None:
        self.host = host
        self.limits = limits
        self.uid = uid
        self._process: asyncio.subprocess.Process | None = None
        self._ids = itertools.count(1)
        self._one_call = asyncio.Lock()
        self.calls = 0

    async def start(self) -> None:
        self.host.check()
        self._process = await asyncio.create_subprocess_exec(
            *self.host.command(self.limits, self.uid),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            # One answer line at most: a packed workspace, base64 (incompressible files).
            limit=(self.limits.workspace_mb << 20) * 2 + _LINE_SLACK,
            env=_ENVIRONMENT,  # none of the service's: bubblewrap's own is readable inside
        )
        ready = await self._line(self.limits.wall_s)
        if not ready.get("ready"):
            raise SandboxFailed(f"the sandbox did not start: {ready}")
        if self.host.cpu_group is not None:  # before anything of the caller's runs inside
            cgroups.join(self.host.cpu_group, self.uid)

    @property
    def busy(self) -> bool:
        """Whether a call is under way."""
        return self._one_call.locked()

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    def cpu_seconds(self) -> float:
        """CPU seconds its processes used so far, from the kernel's accounting of its user:
        the running ones' and, through their parents, those that ended."""
        total = 0
        for pid in processes_of(self.uid):
            try:
                with open(f"/proc/{pid}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:  # it ended meanwhile
                continue
            # utime, stime, cutime, cstime (fields 14-17 of stat; 12-15 after the name)
            total += sum(int(value) for value in fields[11:15])
        return total / _TICKS

    async def run(
        self,
        argv: list[str] | None = None,
        *,
        script: str | None = None,
        stdin: str | None = None,
        on_output: OnOutput | None = None,
    ) -> Execution:
        """Runs a command (or a shell script) in the workspace within the limits."""
        return await self._execute(
            {"op": "run", "argv": argv, "script": script, "stdin": stdin}, on_output
        )

    async def python(self, code: str, *, on_output: OnOutput | None = None) -> Execution:
        """Runs Python code in the session's kernel, whose variables live while it does."""
        return await self._execute({"op": "python", "code": code}, on_output)

    async def _execute(self, request: dict[str, Any], on_output: OnOutput | None) -> Execution:
        limits = self.limits
        async with self._one_call:
            before = self.cpu_seconds()
            answer, output = await self._call(
                {
                    **request,
                    "cpu_s": limits.cpu_s,
                    "wall_s": limits.wall_s,
                    "output_bytes": limits.output_bytes,
                    "processes": limits.processes,
                },
                on_output,
            )
            used = max(0.0, self.cpu_seconds() - before)
        python = request["op"] == "python"
        if "error" in answer and not python and answer.get("exit") is None:
            raise SandboxFailed(answer["error"])
        exit_code = answer.get("exit")
        if python and not answer.get("died"):
            exit_code = 0 if answer.get("ok") else 1
        execution = Execution(
            exit_code=exit_code,
            signal=answer.get("signal"),
            stdout="".join(output["stdout"]),
            stderr="".join(output["stderr"]),
            timed_out=bool(answer.get("timed_out")),
            cpu_s=round(used, 3),
            wall_s=float(answer.get("wall_s", 0.0)),
            dropped_bytes=sum(answer.get("dropped", {}).values()),
            created=answer.get("created", []),
            changed=answer.get("changed", []),
            deleted=answer.get("deleted", []),
            workspace_bytes=int(answer.get("workspace_bytes", 0)),
            value=answer.get("value"),
            error=answer.get("error") if python else None,
            figures=answer.get("figures", []),
            restarted=bool(answer.get("restarted")),
            kernel_died=bool(answer.get("died")),
        )
        execution.stopped_by = stopped_by(execution, limits)
        return execution

    async def files(self) -> list[dict[str, Any]]:
        async with self._one_call:
            answer, _ = await self._call({"op": "files"}, None)
        if "error" in answer:
            raise SandboxFailed(answer["error"])
        files: list[dict[str, Any]] = answer["files"]
        return files

    async def read(self, path: str, max_bytes: int) -> bytes | None:
        """A workspace file's first `max_bytes`; None if there is no such file."""
        async with self._one_call:
            answer, _ = await self._call({"op": "read", "path": path, "max_bytes": max_bytes}, None)
        if answer.get("missing"):
            return None
        return base64.b64decode(_data(answer))

    async def write(self, path: str, data: bytes) -> None:
        """Writes a workspace file (its folders made as needed); `ValueError` for a path
        outside the workspace."""
        async with self._one_call:
            answer, _ = await self._call(
                {"op": "write", "path": path, "data": base64.b64encode(data).decode()}, None
            )
        if "error" in answer:
            raise ValueError(answer["error"])  # a path outside the workspace

    async def pack(self) -> bytes:
        """The workspace as a gzipped tar."""
        async with self._one_call:
            answer, _ = await self._call({"op": "pack"}, None)
        return base64.b64decode(_data(answer))

    async def unpack(self, archive: bytes) -> None:
        """Restores a workspace `pack` gave."""
        async with self._one_call:
            answer, _ = await self._call(
                {"op": "unpack", "data": base64.b64encode(archive).decode()}, None
            )
        if "error" in answer:
            raise SandboxFailed(f"the workspace could not be restored: {answer['error']}")

    async def ended(self) -> None:
        """Returns once the sandbox's processes ended (stopped, or died)."""
        if self._process is not None:
            await self._process.wait()

    async def close(self) -> None:
        """Stops the sandbox: what runs inside is killed (its namespace's first process, and
        with it every other), then bubblewrap, seeing it end, exits and reaps it."""
        process = self._process
        if process is None or process.returncode is not None:
            return
        kill_user(self.uid, sparing=process.pid)
        try:
            await asyncio.wait_for(process.wait(), _GRACE_S)
        except TimeoutError:  # never seen: bubblewrap itself does not exit
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()

    async def _call(
        self, request: dict[str, Any], on_output: OnOutput | None
    ) -> tuple[dict[str, Any], dict[str, list[str]]]:
        process = self._process
        if process is None or process.returncode is not None or process.stdin is None:
            raise SandboxFailed("the sandbox is not running")
        call = str(next(self._ids))
        self.calls += 1
        try:
            process.stdin.write((json.dumps({**request, "id": call}) + "\n").encode())
            await process.stdin.drain()
        except ConnectionError:  # it ended: what it said last is the reason
            await self._line(_GRACE_S)
            raise SandboxFailed("the sandbox ended") from None
        output: dict[str, list[str]] = {"stdout": [], "stderr": []}
        wait = float(request.get("wall_s", self.limits.wall_s)) + _GRACE_S
        while True:
            message = await self._line(wait)
            if message.get("id") != call:
                continue
            if "stream" in message:
                output[message["stream"]].append(message["data"])
                if on_output is not None:
                    on_output(message["stream"], message["data"])
                continue
            return message, output

    async def _line(self, timeout_s: float) -> dict[str, Any]:
        process = self._process
        assert process is not None
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), timeout_s)
        except TimeoutError:
            await self.close()
            raise SandboxFailed("the sandbox stopped answering and was stopped") from None
        if not line:
            await self.close()
            error = b""
            if process.stderr is not None:
                error = await process.stderr.read(4096)
            raise SandboxFailed(
                "the sandbox ended" + (f": {error.decode(errors='replace')}" if error else "")
            )
        message: dict[str, Any] = json.loads(line)
        return message


def _data(answer: dict[str, Any]) -> str:
    """An answer's `data`; its error (the agent failed to read or pack) as `SandboxFailed`."""
    if "error" in answer:
        raise SandboxFailed(answer["error"])
    data: str = answer["data"]
    return data
