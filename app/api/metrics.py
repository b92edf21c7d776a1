"""`GET /metrics`: Prometheus text format; no token, like the health routes (expose it to
your scraper only)."""

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.api.deps import State
from app.api.inputs import CheckedRoute

router = APIRouter(tags=["health"], route_class=CheckedRoute)


@router.get(
    "/metrics",
    summary="Prometheus metrics of this process",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}},
)
async def metrics(state: State) -> Response:
    """Spend, tokens, LLM and tool calls, rate-limit refusals and budget stops by tenant (and
    model); run durations by final state; active runs and open streams."""
    return Response(state.runs.metrics.render(), media_type=CONTENT_TYPE_LATEST)
