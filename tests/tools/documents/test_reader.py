"""Documents are read in warm processes of their own: text comes back page by page, and a
document over a limit (CPU time, wall time, pages) is refused within it, the next one read
as usual."""

import os
import resource
import time
from collections.abc import Iterator

import pytest

from app.tools.documents import DocumentLimits, DocumentReader, DocumentRefused, DocumentTooLarge
from tests.resources.documents import make_pdf
from tests.tools.documents.bombs import make_pdf_bomb


@pytest.fixture
def reader() -> Iterator[DocumentReader]:
    # A wall limit far past the CPU limit: the reader is niced below everything else, and on
    # a machine busy with the suite's other workers its one CPU second takes a while to come.
    reader = DocumentReader(DocumentLimits(cpu_s=1, timeout_s=90, max_pages=6, workers=1))
    yield reader
    reader.close()


def test_a_pdf_is_read_page_by_page_in_a_warm_process(reader: DocumentReader) -> None:
    first = reader.read_pdf(make_pdf(["one", "two"]))
    [child] = reader._children
    second = reader.read_pdf(make_pdf(["three"]))

    assert (first.pages, [t.strip() for t in first.texts]) == (2, ["one", "two"])
    assert (second.pages, [t.strip() for t in second.texts]) == (1, ["three"])
    assert reader._children == {child}  # the same process read both
    assert child.pid != os.getpid()


def test_reading_stops_once_enough_text_is_read(reader: DocumentReader) -> None:
    read = reader.read_pdf(make_pdf([f"page {n}" for n in range(1, 6)]), stop_chars=10)
    assert read.pages == 5
    assert len(read.texts) == 2


def test_a_malformed_pdf_is_unreadable_not_refused(reader: DocumentReader) -> None:
    read = reader.read_pdf(b"%PDF-1.7\nthis is no PDF at all")
    assert read.pages is None
    assert read.unreadable


def test_a_pdf_bomb_is_refused_within_its_cpu_limit(reader: DocumentReader) -> None:
    bomb = make_pdf_bomb()
    assert len(bomb) < 8_000
    before = _children_cpu_s()
    started = time.perf_counter()
    with pytest.raises(DocumentRefused) as refused:
        reader.read_pdf(bomb)
    elapsed = time.perf_counter() - started

    assert refused.value.reason == "cpu_time"
    assert "more than 1 s of CPU time" in refused.value.detail
    # Six pages at ~4 s each unbounded; here one second of CPU after the process's start
    # (rounded up to whole seconds), however busy the machine (the wall clock is not).
    assert _children_cpu_s() - before < 3
    assert elapsed < reader.limits.timeout_s
    # The next document is read by a fresh process.
    assert [t.strip() for t in reader.read_pdf(make_pdf(["after"])).texts] == ["after"]


def _children_cpu_s() -> float:
    """CPU time of this process's finished children (the reader waits for those it stops)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def test_a_pdf_over_the_wall_time_limit_is_refused_and_its_process_killed() -> None:
    reader = DocumentReader(DocumentLimits(cpu_s=60, timeout_s=1, workers=1))
    try:
        started = time.perf_counter()
        with pytest.raises(DocumentRefused) as refused:
            reader.read_pdf(make_pdf_bomb())
        elapsed = time.perf_counter() - started
        assert refused.value.reason == "timeout"
        assert elapsed < 3
        assert reader._children == set()
    finally:
        reader.close()


def test_a_pdf_with_more_pages_than_the_limit_is_too_large(reader: DocumentReader) -> None:
    with pytest.raises(DocumentTooLarge) as refused:
        reader.read_pdf(make_pdf([str(n) for n in range(7)]))
    assert refused.value.reason == "pages"
    assert "7 pages; at most 6" in refused.value.detail


async def test_a_coroutine_waits_without_holding_a_thread(reader: DocumentReader) -> None:
    read = await reader.read_pdf_async(make_pdf(["async"]))
    assert [t.strip() for t in read.texts] == ["async"]
