"""`GET /metrics`: Prometheus text format; no token, like the health routes (expose it to
your scraper only: with `OMNIFORGE_METRICS_PORT` it is served on that port alone)."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.api.deps import State
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.listeners import refuse_off_metrics_port
from app.observability.loop_lag import LoopLag


@asynccontextmanager
async def sample_loop_lag(app: FastAPI) -> AsyncIterator[None]:
    """Part of the app's lifespan: samples the event loop's lag while the app serves."""
    lag = LoopLag()
    lag.start()
    app.state.loop_lag = lag
    try:
        yield
    finally:
        lag.stop()


def _loop_lag(request: Request) -> LoopLag:
    lag: LoopLag = request.app.state.loop_lag
    return lag


LoopLagSampler = Annotated[LoopLag, Depends(_loop_lag)]

router = APIRouter(tags=["health"], route_class=CheckedRoute)


@router.get(
    "/metrics",
    summary="Prometheus metrics of this process",
    response_class=Response,
    # With OMNIFORGE_METRICS_PORT, only there (404 on the API's port).
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}, **problems(404)},
    dependencies=[Depends(refuse_off_metrics_port)],
)
async def metrics(state: State, loop_lag: LoopLagSampler) -> Response:
    """Spend, tokens, LLM and tool calls, rate-limit refusals and budget stops by tenant (and
    model); run durations by final state; active runs and open streams; the event loop's lag."""
    body = state.runs.metrics.render() + loop_lag.render()
    return Response(body, media_type=CONTENT_TYPE_LATEST)
