"""A small pool of warm reading processes (`child.py`), each kept by one thread of the pool's
own: a document is read in another process, within CPU-time, wall-time, memory and page
limits, while the service's threads and event loop go on."""

import asyncio
import contextlib
import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.bulkheads import TenantSlots
from app.tools.documents.errors import DocumentRefused, DocumentTooLarge
from app.tools.documents.limits import DocumentLimits

_CHILD = Path(__file__).with_name("child.py")
_HEADER = struct.Struct(">Q")
_WARM_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class PdfText:
    """A PDF as read: its page count and title, and the text of its pages from the first
    (fewer than `pages` when reading stopped early). `unreadable` says why a PDF could not be
    opened at all (a malformed file: no text, no pages); `failures` names pages whose text
    could not be extracted (their text is empty)."""

    pages: int | None
    title: str | None = None
    texts: tuple[str, ...] = ()
    encrypted: bool = False
    unreadable: str | None = None
    failures: tuple[str, ...] = ()


class DocumentReader:
    """Reads documents in `limits.workers` warm processes; a caller waits for a free one.
    `DocumentRefused` (or `DocumentTooLarge`) when a document breaks a limit."""

    def __init__(self, limits: DocumentLimits | None = None) -> None:
        self.limits = limits or DocumentLimits()
        self._threads = ThreadPoolExecutor(
            max_workers=self.limits.workers, thread_name_prefix="document-reader"
        )
        self._local = threading.local()
        self._lock = threading.Lock()
        self._children: set[subprocess.Popen[bytes]] = set()
        self.closed = False
        self.tenants = TenantSlots(self.limits.tenant_slots)
        """Hold one of these while a tenant's document is read (`tenants.slot(tenant_id)`)."""

    def warm(self) -> None:
        """Starts every reading process now, in the background (each takes a moment to
        start, better spent before the first document than during it): for a deployment
        that expects documents; otherwise each starts with the first document it reads."""
        together = threading.Barrier(self.limits.workers)
        for _ in range(self.limits.workers):
            self._threads.submit(self._warm_one, together)

    def _warm_one(self, together: threading.Barrier) -> None:
        # Each thread holds the barrier until all have started, so each starts its own.
        with contextlib.suppress(threading.BrokenBarrierError):
            together.wait(timeout=_WARM_TIMEOUT_S)
        self._child()

    def read_pdf(self, data: bytes, *, stop_chars: int | None = None) -> PdfText:
        """Blocks the calling thread (never call it on the event loop); `stop_chars`: pages
        are read until their text is longer than that."""
        return self._threads.submit(self._read_pdf, data, stop_chars).result()

    async def read_pdf_async(self, data: bytes, *, stop_chars: int | None = None) -> PdfText:
        """`read_pdf` for a coroutine: it waits without holding a thread."""
        return await asyncio.wrap_future(self._threads.submit(self._read_pdf, data, stop_chars))

    def close(self) -> None:
        """Stops the reading processes; reads under way fail."""
        self.closed = True
        self._threads.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            children, self._children = set(self._children), set()
        for child in children:
            _stop(child)

    def _read_pdf(self, data: bytes, stop_chars: int | None) -> PdfText:
        limits = self.limits
        job = {"cpu_s": limits.cpu_s, "max_pages": limits.max_pages, "stop_chars": stop_chars}
        answer = self._ask(json.dumps(job).encode(), data)
        limit = answer.get("limit")
        if limit == "cpu_time":
            raise DocumentRefused(
                "cpu_time", f"reading the PDF needs more than {limits.cpu_s} s of CPU time"
            )
        if limit == "memory":
            raise DocumentTooLarge(
                "memory",
                f"reading the PDF needs more than {limits.memory_bytes // 2**20} MiB of memory",
            )
        if limit == "pages":
            raise DocumentTooLarge(
                "pages",
                f"the PDF has {answer.get('pages')} pages; at most {limits.max_pages} are read",
            )
        if "unreadable" in answer:
            return PdfText(pages=None, unreadable=str(answer["unreadable"]))
        return PdfText(
            pages=int(answer["pages"]),
            title=answer.get("title"),
            texts=tuple(answer["texts"]),
            encrypted=bool(answer["encrypted"]),
            failures=tuple(answer["failures"]),
        )

    def _ask(self, job: bytes, data: bytes) -> dict[str, Any]:
        """One job answered by this thread's process, within the time limit."""
        child = self._child()
        deadline = time.monotonic() + self.limits.timeout_s
        try:
            assert child.stdin is not None
            assert child.stdout is not None
            child.stdin.write(_HEADER.pack(len(job)) + job + _HEADER.pack(len(data)))
            child.stdin.write(data)
            child.stdin.flush()
            answer = _read_frame(child.stdout.fileno(), deadline)
        except (BrokenPipeError, ConnectionError, EOFError):
            answer = None
        except TimeoutError:
            self._drop(child)
            raise DocumentRefused(
                "timeout", f"reading the PDF takes longer than {self.limits.timeout_s:g} s"
            ) from None
        if answer is None:
            self._drop(child)
            code = child.returncode
            if code in (-signal.SIGXCPU, -signal.SIGKILL):
                raise DocumentRefused(
                    "cpu_time",
                    f"reading the PDF needs more than {self.limits.cpu_s} s of CPU time",
                )
            raise DocumentRefused("crashed", "the process reading the PDF failed on it")
        decoded: dict[str, Any] = json.loads(answer)
        if "limit" in decoded:  # the process exits after a limit: start afresh next time
            self._drop(child)
        return decoded

    def _child(self) -> "subprocess.Popen[bytes]":
        child: subprocess.Popen[bytes] | None = getattr(self._local, "child", None)
        if child is not None and child.poll() is None:
            return child
        child = subprocess.Popen(
            [sys.executable, "-I", str(_CHILD), str(self.limits.memory_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        with self._lock:
            if self.closed:
                _stop(child)
                raise DocumentRefused("crashed", "the document reader is shut down")
            self._children.add(child)
        self._local.child = child
        return child

    def _drop(self, child: "subprocess.Popen[bytes]") -> None:
        self._local.child = None
        with self._lock:
            self._children.discard(child)
        _stop(child)


def _read_frame(fd: int, deadline: float) -> bytes | None:
    """One frame from `fd`; None at end of file, `TimeoutError` past `deadline`."""
    header = _read_exactly(fd, _HEADER.size, deadline)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    return _read_exactly(fd, size, deadline)


def _read_exactly(fd: int, size: int, deadline: float) -> bytes | None:
    chunks: list[bytes] = []
    left = size
    while left:
        wait = deadline - time.monotonic()
        if wait <= 0 or not select.select([fd], [], [], wait)[0]:
            raise TimeoutError
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _stop(child: "subprocess.Popen[bytes]") -> None:
    if child.poll() is None:
        child.kill()
    child.wait()
    for stream in (child.stdin, child.stdout):
        if stream is not None:
            stream.close()
