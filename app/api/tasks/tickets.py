"""/api/v1/tasks/{id}/stream-ticket: a short-lived credential that opens one task's stream,
for a browser's `EventSource` (which cannot send an `Authorization` header)."""

from datetime import UTC, datetime
from urllib.parse import quote
from uuid import UUID

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from app.api.access import RequireChainRead
from app.api.deps import State
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.tasks.schemas import stream_url
from app.security.stream_tickets import QUERY_PARAMETER

router = APIRouter(prefix="/api/v1/tasks", tags=["tasks"], route_class=CheckedRoute)


class StreamTicket(BaseModel):
    """A ticket for `GET /api/v1/tasks/{id}/events?ticket=…`, without an `Authorization`
    header. It opens that task's stream only, as the caller who asked for it (same tenant,
    roles and view of the steps), until `expires_at`; a stream opened in time stays open, and
    an `EventSource` resumes it with `Last-Event-ID` while the ticket lasts."""

    ticket: str = Field(description="Opaque; treat it as a credential.")
    expires_at: datetime
    stream_url: str = Field(description="The task's stream with the ticket, ready to open.")


@router.post(
    "/{task_id}/stream-ticket",
    summary="Get a ticket to follow a task's stream from a browser",
    response_model=StreamTicket,
    responses=problems(401, 403, 404, 422),
)
async def issue_stream_ticket(
    task_id: UUID, caller: RequireChainRead, state: State
) -> JSONResponse:
    """A ticket for `GET /api/v1/tasks/{id}/events?ticket=…` without an `Authorization`
    header (a browser's `EventSource` cannot send one): that task's stream only, as this caller
    (tenant, roles, view of the steps), for `OMNIFORGE_STREAM_TICKET_TTL_S` (60 s by default).
    Needs what reading the stream needs (`chain:read`); another tenant's task is 404."""
    task = await state.tasks.find(caller, task_id)
    ticket = state.stream_tickets.issue(caller.principal, task.id)
    answer = StreamTicket(
        ticket=ticket,
        expires_at=datetime.fromtimestamp(state.stream_tickets.expires_at(ticket), UTC),
        stream_url=f"{stream_url(task.id)}?{QUERY_PARAMETER}={quote(ticket)}",
    )
    # A credential: no cache keeps it.
    return JSONResponse(answer.model_dump(mode="json"), headers={"Cache-Control": "no-store"})
