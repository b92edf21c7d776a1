"""Liveness and readiness; no token needed."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import text

from app.api.deps import State
from app.api.errors import UNAVAILABLE, problem_response, problems, unavailable_response
from app.api.inputs import CheckedRoute
from app.storage import current_revision, head_revision

router = APIRouter(tags=["health"], route_class=CheckedRoute)


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    schema_revision: str


@router.get("/healthz", summary="The process is alive")
async def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    summary="The database is reachable and migrated",
    response_model=Readiness,
    responses=problems(503),
)
async def readyz(state: State) -> JSONResponse:
    try:
        async with state.database.read() as connection:
            await connection.execute(text("SELECT 1"))
        revision = await current_revision(state.database)
    except Exception as exc:  # whatever stops the check, the instance is not ready
        return unavailable_response(
            f"not ready: the database is unreachable ({type(exc).__name__})"
        )
    head = head_revision()
    if revision is None or revision != head:
        return problem_response(
            UNAVAILABLE,
            f"the database schema is at {revision or 'no revision'}, not {head}: "
            "run `omniforge migrate`",
        )
    # Still loading is ready (tasks wait for it); failed to load is not: no task would run.
    failure = state.runtime.gateway.load_failure()
    if failure is not None:
        return problem_response(
            UNAVAILABLE,
            f"the LLM gateway could not be loaded ({type(failure).__name__}): see the log",
        )
    return JSONResponse(Readiness(status="ready", schema_revision=revision).model_dump())
