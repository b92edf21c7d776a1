"""Uploaded documents are read within their limits: a PDF bomb is refused with 422
`document-refused` once it has used its CPU time, a PDF with more pages than are read with
413 `document-too-large`, each naming `body.file`; nothing is stored of either, and the
service answers other requests meanwhile."""

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.api.helpers import assert_problem
from tests.fakes.openai_server import FakeLLMServer
from tests.resources.documents import make_pdf
from tests.service import Service, running_service, service_settings
from tests.tools.documents.bombs import make_pdf_bomb

FILES = "/api/v1/files"
PROBES = 20


@pytest.fixture
async def limited(
    service_dir: Path, database_url: str, fake_llm: FakeLLMServer
) -> AsyncIterator[Service]:
    settings = service_settings(
        service_dir, database_url, fake_llm, document_cpu_s=1, document_max_pages=3
    )
    async with running_service(settings, fake_llm) as service:
        yield service


async def test_a_pdf_bomb_is_refused_within_its_limit_while_the_service_answers(
    limited: Service,
) -> None:
    tenant = await limited.create_tenant("bombed")
    bomb = make_pdf_bomb(pages=3)
    health_ms: list[float] = []
    async with limited.client(tenant) as client, limited.client() as prober:

        async def upload() -> tuple[object, float]:
            started = time.perf_counter()
            response = await client.post(FILES, files={"file": ("bomb.pdf", bomb, "x/y")})
            return response, time.perf_counter() - started

        uploading = asyncio.create_task(upload())
        # The reading process is niced: a prober spinning without pause would starve it.
        for _ in range(PROBES):
            started = time.perf_counter()
            assert (await prober.get("/healthz")).status_code == 200
            health_ms.append((time.perf_counter() - started) * 1000)
        probed_while_reading = not uploading.done()
        response, elapsed = await uploading
        listed = (await client.get(FILES)).json()
        normal = await client.post(FILES, files={"file": ("ok.pdf", make_pdf(["fine"]), "x/y")})

    body = assert_problem(response, 422, "document-refused")  # type: ignore[arg-type]
    assert body["errors"] == [
        {"field": "body.file", "message": "reading the PDF needs more than 1 s of CPU time"}
    ]
    # Three pages of ~4 s each unbounded; within the limit here (and the wall-time limit).
    assert elapsed < limited.settings.document_timeout_s
    assert listed["items"] == []
    assert probed_while_reading
    # Generous: a busy test machine (and its collector) has pauses of its own; reading the
    # bomb in the service's own threads held it up for seconds.
    assert sorted(health_ms)[len(health_ms) * 9 // 10] < 100, sorted(health_ms)[-5:]
    assert max(health_ms) < 1000, sorted(health_ms)[-5:]
    assert normal.status_code == 201, normal.text
    assert normal.json()["pages"] == 1


async def test_a_pdf_with_more_pages_than_are_read_is_too_large(limited: Service) -> None:
    tenant = await limited.create_tenant("pages")
    async with limited.client(tenant) as client:
        response = await client.post(
            FILES, files={"file": ("long.pdf", make_pdf(["1", "2", "3", "4"]), "x/y")}
        )
        listed = (await client.get(FILES)).json()

    body = assert_problem(response, 413, "document-too-large")
    assert body["errors"] == [
        {"field": "body.file", "message": "the PDF has 4 pages; at most 3 are read"}
    ]
    assert listed["items"] == []
