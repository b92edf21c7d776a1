"""The reading process: PDFs in, their text out, within the limits it is given.

Run as a script (`python -I child.py MEMORY_BYTES`), so that it imports only the standard
library and pypdf. It reads jobs from stdin and answers each on stdout, one frame each way:
an 8-byte big-endian length, then that many bytes (a job is a JSON frame and the document's
bytes; an answer is a JSON frame). After a job that hit a limit it exits: the service starts
a fresh process rather than trust one that ran out of CPU time or memory.
"""

import io
import json
import math
import os
import resource
import signal
import struct
import sys
from typing import Any, BinaryIO

_HEADER = struct.Struct(">Q")


class _OutOfCpu(BaseException):
    """Raised by the CPU-limit signal; a BaseException, so that pypdf's own broad `except
    Exception` handlers do not swallow it."""


def _on_cpu_limit(signum: int, frame: object) -> None:
    raise _OutOfCpu


def main() -> None:
    memory = int(sys.argv[1])
    # Reading yields to the service: on a busy machine its requests come first.
    os.nice(10)
    from pypdf import PdfReader

    if memory > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    signal.signal(signal.SIGXCPU, _on_cpu_limit)
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while True:
        job = _read_frame(source)
        data = _read_frame(source)
        if job is None or data is None:
            return
        answer = _read(PdfReader, json.loads(job), data)
        _write_frame(sink, json.dumps(answer).encode())
        if "limit" in answer:
            return


def _read(reader_class: Any, job: dict[str, Any], data: bytes) -> dict[str, Any]:
    used = resource.getrusage(resource.RUSAGE_SELF)
    # The soft limit only: an unprivileged process could not raise the hard one again. A
    # process stuck past it in C code is killed by the service's time limit.
    cpu_until = math.ceil(used.ru_utime + used.ru_stime) + int(job["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_until, resource.RLIM_INFINITY))
    try:
        return _extract(reader_class, data, int(job["max_pages"]), job.get("stop_chars"))
    except _OutOfCpu:
        return {"limit": "cpu_time"}
    except MemoryError:
        return {"limit": "memory"}
    finally:
        resource.setrlimit(resource.RLIMIT_CPU, (resource.RLIM_INFINITY,) * 2)


def _extract(
    reader_class: Any, data: bytes, max_pages: int, stop_chars: int | None
) -> dict[str, Any]:
    try:
        reader = reader_class(io.BytesIO(data))
        encrypted = bool(reader.is_encrypted) and not reader.decrypt("")
        count = len(reader.pages)
        metadata = None if encrypted else reader.metadata
        title = metadata.title if metadata is not None else None
    except MemoryError:
        raise
    except Exception as exc:  # pypdf raises many kinds on malformed files
        return {"unreadable": f"{type(exc).__name__}: {exc}"}
    if count > max_pages:
        return {"limit": "pages", "pages": count}
    texts: list[str] = []
    failures: list[str] = []
    total = 0
    if not encrypted:
        for page in reader.pages:
            try:
                text = page.extract_text() or ""
            except MemoryError:
                raise
            except Exception as exc:
                failures.append(f"page {len(texts) + 1}: {type(exc).__name__}: {exc}")
                text = ""
            texts.append(text)
            total += len(text)
            if stop_chars is not None and total > stop_chars:
                break
    return {
        "pages": count,
        "title": None if title is None else str(title),
        "encrypted": encrypted,
        "texts": texts,
        "failures": failures,
    }


def _read_frame(source: BinaryIO) -> bytes | None:
    header = source.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    body = source.read(size)
    return body if len(body) == size else None


def _write_frame(sink: BinaryIO, body: bytes) -> None:
    sink.write(_HEADER.pack(len(body)) + body)
    sink.flush()


if __name__ == "__main__":
    main()
