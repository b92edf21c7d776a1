"""`OMNIFORGE_METRICS_PORT`: a real `omniforge serve` process answers `/metrics` on that port
alone (the API's port says 404, so publishing the API publishes no metrics), with the counters of
the runs its API port took, and stops both listeners on SIGTERM."""

import signal
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.api.helpers import assert_problem, stream, submit
from tests.cluster import cluster, free_port
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.service import MODEL


async def test_metrics_are_served_on_the_metrics_port_alone(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    metrics_port = free_port()
    async with cluster(own_database_url, tmp_path, fake_llm) as group:
        instance = await group.instance("a", OMNIFORGE_METRICS_PORT=str(metrics_port))
        fake_llm.script(MODEL, Reply.text("391"))
        async with instance.client(group.token) as api:
            task_id = (await submit(api))["task_id"]
            events = await stream(api, task_id)
            assert events[-1].json["final_state"] == "completed"

            assert_problem(await api.get("/metrics"), 404, "not-found")

        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{metrics_port}") as scraper:
            scraped = await scraper.get("/metrics")  # no token, as on the API's port before
        assert scraped.status_code == 200
        assert scraped.headers["content-type"].startswith("text/plain")
        calls = {
            sample.labels["tenant"]: sample.value
            for family in text_string_to_metric_families(scraped.text)
            for sample in family.samples
            if sample.name == "omniforge_llm_calls_total"
        }
        assert calls == {group.tenant: 1.0}  # the run the API's port took, in one process

        # uvicorn exits by the signal it caught, once shut down: both listeners with it.
        assert await instance.terminate() in (0, -signal.SIGTERM)
        assert "Application shutdown complete" in instance.log
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{metrics_port}") as scraper:
            try:
                await scraper.get("/metrics")
            except httpx.ConnectError:
                pass
            else:
                raise AssertionError("the metrics port still answers after SIGTERM")
