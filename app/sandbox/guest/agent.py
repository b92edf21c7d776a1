"""The agent of a live sandbox: the first program bubblewrap starts in it, run by the system's
Python (standard library only, nothing of the service's). It reads one request per line on
stdin and answers with JSON lines on stdout, one call at a time:

- `run`: a command (`argv`, or a shell `script`) in /workspace, in a process group of its own,
  its CPU seconds capped (`prlimit`) and the group killed at its wall-time limit; its output
  streamed as `{"id", "stream", "data"}` lines (past `output_bytes` read and dropped), then
  the answer: exit status or signal, whether the wall-time limit stopped it, how much output
  was dropped, and the files it created, changed or deleted.
- `files`: the workspace's files and their sizes; `read` and `write`: one of them.
- `pack`: the workspace as a gzipped tar (base64); `unpack`: the reverse, into an empty one.

The service measures the sandbox's CPU itself, from the kernel's accounting of its own user:
what this program says of CPU is never billed."""

import base64
import contextlib
import io
import json
import os
import resource
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from typing import IO, Any

WORKSPACE = "/workspace"
KERNEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel.py")
CHUNK = 32 * 1024  # bytes of output per streamed line at most
MAX_LISTED = 200  # files named per list in an answer
LEFT_OPEN_S = 1.0  # how long a call's output is read after its command ended
_out = sys.stdout
_writing = threading.Lock()

Files = dict[str, tuple[int, int]]


def send(message: dict[str, Any]) -> None:
    line = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    with _writing:
        _out.write(line + "\n")
        _out.flush()


def scan() -> Files:
    """The workspace's files: path -> (size, mtime in ns); links are not followed."""
    found: Files = {}
    for top, dirs, names in os.walk(WORKSPACE):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
        for name in names:
            path = os.path.join(top, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            found[os.path.relpath(path, WORKSPACE)] = (info.st_size, info.st_mtime_ns)
    return found


def changes(before: Files) -> dict[str, Any]:
    after = scan()
    created = sorted(p for p in after if p not in before)
    changed = sorted(p for p in after if p in before and after[p] != before[p])
    return {
        "created": [{"path": p, "size": after[p][0]} for p in created[:MAX_LISTED]],
        "changed": [{"path": p, "size": after[p][0]} for p in changed[:MAX_LISTED]],
        "deleted": sorted(p for p in before if p not in after)[:MAX_LISTED],
        "workspace_bytes": sum(size for size, _ in after.values()),
    }


def pump(
    call: str, stream: str, pipe: IO[bytes], limit: int, seen: list[int], end: bytes = b""
) -> None:
    """Streams a pipe until it closes (or, given `end`, until that marker comes: the kernel's
    pipes stay open between calls); past `limit` bytes what comes is read and dropped (the
    writer never blocks on a full pipe)."""
    held = b""  # what may be the start of the marker
    while data := os.read(pipe.fileno(), CHUNK):
        data, done = held + data, False
        if end and end in data:
            data, done = data[: data.index(end)], True
        elif end:
            keep = next((n for n in range(len(end) - 1, 0, -1) if data.endswith(end[:n])), 0)
            data, held = (data[:-keep], data[-keep:]) if keep else (data, b"")
        room = limit - seen[0]
        seen[0] += len(data)
        if room > 0 and data:
            send({"id": call, "stream": stream, "data": data[:room].decode("utf-8", "replace")})
        if done:
            return


def killer(group: int) -> Callable[[], None]:
    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)

    return kill


def held(request: dict[str, Any]) -> list[str]:
    """`prlimit` with the call's process limit: below the sandbox's, which keeps room for
    this agent's own threads."""
    return ["/usr/bin/prlimit", f"--nproc={int(request['processes'])}"]


class Watch:
    """One call of a process (group): its output streamed by two readers (up to `end` on
    pipes that stay open), its group killed at the call's wall-time limit."""

    def __init__(
        self, request: dict[str, Any], process: "subprocess.Popen[bytes]", end: bytes = b""
    ) -> None:
        self.limit = int(request["output_bytes"])
        self.seen = {"stdout": [0], "stderr": [0]}
        self.readers = [
            threading.Thread(
                target=pump,
                args=(request["id"], name, pipe, self.limit, self.seen[name], end),
                daemon=True,
            )
            for name, pipe in (("stdout", process.stdout), ("stderr", process.stderr))
        ]
        for reader in self.readers:
            reader.start()
        self.kill = killer(process.pid)
        self.timed_out = threading.Event()
        self.started = time.monotonic()
        self.timer = threading.Timer(float(request["wall_s"]), self._at_limit)
        self.timer.start()

    def _at_limit(self) -> None:
        self.timed_out.set()
        self.kill()

    def stop_timer(self) -> None:
        self.timer.cancel()

    def outcome(self, read_for_s: float | None) -> dict[str, Any]:
        """Once the output is read (or `read_for_s` passed): whether the limit stopped it,
        its wall time, and how much output was dropped."""
        for reader in self.readers:
            reader.join(read_for_s)
        return {
            "timed_out": self.timed_out.is_set(),
            "wall_s": round(time.monotonic() - self.started, 3),
            "dropped": {name: max(0, n[0] - self.limit) for name, n in self.seen.items()},
        }


def run(request: dict[str, Any]) -> dict[str, Any]:
    argv = request.get("argv") or ["/bin/sh", "-c", request["script"]]
    cpu = max(1, int(request["cpu_s"] + 0.999))
    before = scan()
    try:
        process = subprocess.Popen(
            [*held(request), f"--cpu={cpu}:{cpu + 1}", "--", *argv],
            cwd=WORKSPACE,
            stdin=subprocess.PIPE if request.get("stdin") is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return {"exit": None, "error": f"cannot start {argv[0]}: {exc.strerror}"}
    watch = Watch(request, process)
    if process.stdin is not None:
        try:
            process.stdin.write(str(request["stdin"]).encode())
            process.stdin.close()
        except OSError:
            pass
    status = process.wait()
    watch.stop_timer()
    watch.kill()  # what it left running in its group goes with it
    return {
        "exit": status if status >= 0 else None,
        "signal": -status if status < 0 else None,
        # A process it started in a session of its own (a server left running) may hold its
        # output open: what it writes after a second is not the call's.
        **watch.outcome(LEFT_OPEN_S),
        **changes(before),
    }


class Kernel:
    """The session's Python (`kernel.py`): started on first use, and again after it died (at
    a limit, or ended by its code), the answer then saying its variables were lost."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.requests: IO[str] | None = None
        self.answers: IO[str] | None = None
        self.starts = 0

    def start(self, request: dict[str, Any]) -> None:
        request_read, request_write = os.pipe()
        answer_read, answer_write = os.pipe()
        self.process = subprocess.Popen(
            [
                *held(request),
                "--",
                sys.executable,
                "-u",
                KERNEL,
                str(request_read),
                str(answer_write),
            ],
            cwd=WORKSPACE,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(request_read, answer_write),
            start_new_session=True,
        )
        os.close(request_read)
        os.close(answer_write)
        self.requests = os.fdopen(request_write, "w", encoding="utf-8")
        self.answers = os.fdopen(answer_read, "r", encoding="utf-8")
        self.starts += 1

    def stop(self) -> None:
        if self.process is not None:
            killer(self.process.pid)()
            self.process.wait()
        for pipe in (self.requests, self.answers):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self.process = self.requests = self.answers = None

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        restarted = False
        if self.process is None or self.process.poll() is not None:
            restarted = self.starts > 0
            self.stop()
            self.start(request)
        process, requests, answers = self.process, self.requests, self.answers
        assert process is not None
        assert requests is not None
        assert answers is not None
        end = ("\x1e" + os.urandom(8).hex() + "\x1e").encode()
        # Its CPU: what it used so far and this call's allowance (the soft limit's signal).
        allowed = int(cpu_of(process.pid) + request["cpu_s"] + 0.999)
        resource.prlimit(process.pid, resource.RLIMIT_CPU, (allowed, resource.RLIM_INFINITY))
        before = scan()
        watch = Watch(request, process, end)
        try:
            requests.write(json.dumps({"code": request["code"], "end": end.decode()}) + "\n")
            requests.flush()
            line = answers.readline()
        except OSError:
            line = ""
        watch.stop_timer()
        if line:
            answer = json.loads(line)
        else:  # it died: at a limit, or its code ended it
            watch.kill()
            status = process.wait()
            answer = {
                "ok": False,
                "error": "the kernel stopped" + (f" (signal {-status})" if status < 0 else ""),
                "signal": -status if status < 0 else None,
                "exit": status if status >= 0 else None,
                "died": True,
            }
        # Its readers end at the call's end marker, or, if it died, once its pipes close
        # (or a second after, if something it started in a session of its own holds them).
        outcome = watch.outcome(None if line else LEFT_OPEN_S)
        if not line:
            self.stop()
        return {**answer, "restarted": restarted, **outcome, **changes(before)}


def cpu_of(pid: int) -> float:
    """A process's CPU seconds so far, its waited-for children's included."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def inside(path: str) -> str | None:
    """`path` (relative to the workspace, or under it) as a path in the workspace; None for
    one outside it."""
    full = os.path.realpath(os.path.join(WORKSPACE, path))
    return full if full.startswith(WORKSPACE + "/") else None


def read(request: dict[str, Any]) -> dict[str, Any]:
    full = inside(request["path"])
    if full is None or not os.path.isfile(full):
        return {"missing": True}
    with open(full, "rb") as file:
        data = file.read(int(request["max_bytes"]))
    return {"data": base64.b64encode(data).decode()}


def write(request: dict[str, Any]) -> dict[str, Any]:
    full = inside(request["path"])
    if full is None:
        return {"error": f"{request['path']!r} is outside the workspace"}
    os.makedirs(os.path.dirname(full), exist_ok=True)
    data = base64.b64decode(request["data"])
    with open(full, "wb") as file:
        file.write(data)
    return {"size": len(data)}


def pack() -> dict[str, Any]:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name in sorted(os.listdir(WORKSPACE)):
            archive.add(os.path.join(WORKSPACE, name), arcname=name)
    return {"data": base64.b64encode(buffer.getvalue()).decode()}


def unpack(request: dict[str, Any]) -> dict[str, Any]:
    data = base64.b64decode(request["data"])
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        # Files and folders alone, each inside the workspace (this Python may predate
        # extraction filters).
        members = [
            member
            for member in archive.getmembers()
            if (member.isfile() or member.isdir())
            and not os.path.isabs(member.name)
            and ".." not in member.name.split("/")
        ]
        for member in members:
            member.mode &= 0o755
        archive.extractall(WORKSPACE, members=members)
    return {"workspace_bytes": sum(size for size, _ in scan().values())}


def main() -> None:
    kernel = Kernel()
    send({"ready": True, "pid": os.getpid()})
    for line in sys.stdin:
        request = json.loads(line)
        op = request.get("op")
        try:
            if op == "run":
                answer = run(request)
            elif op == "python":
                answer = kernel.run(request)
            elif op == "files":
                listed = sorted(scan().items())
                answer = {"files": [{"path": p, "size": s} for p, (s, _) in listed]}
            elif op == "read":
                answer = read(request)
            elif op == "write":
                answer = write(request)
            elif op == "pack":
                answer = pack()
            elif op == "unpack":
                answer = unpack(request)
            else:
                answer = {"error": f"unknown op {op!r}"}
        except Exception as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        send({"id": request.get("id"), "done": True, **answer})


if __name__ == "__main__":
    main()
