"""Usage and cost reports: a tenant's costs grouped as asked, its daily model usage, and one
task's cost records. `Accept: text/csv` gives the same figures as CSV."""

from datetime import UTC, date, datetime, timedelta
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse, Response

from app.api.access import AnyCaller, TenantForCostView
from app.api.costs.schemas import (
    FIGURES,
    CostGroup,
    CostReport,
    Figures,
    TaskCost,
    TaskCosts,
    UsageDay,
    UsageModel,
    UsageReport,
    figures_of,
    to_csv,
)
from app.api.deps import State
from app.api.errors import VALIDATION, ApiError, FieldProblem, problems
from app.api.inputs import CheckedRoute
from app.api.query import Day, Moment, aware
from app.api.services import Reports
from app.governance.costs import CostOrder, GroupBy

router = APIRouter(tags=["costs"], route_class=CheckedRoute)

CSV = "text/csv"
MAX_SPAN = timedelta(days=366)
DEFAULT_SPAN = timedelta(days=30)
_CSV_DOC = {"description": "The same figures as CSV", "content": {CSV: {}}}


def _wants_csv(accept: str | None) -> bool:
    return accept is not None and CSV in accept


def _csv(text: str, filename: str) -> Response:
    return Response(
        text,
        media_type=f"{CSV}; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


def _period(since: datetime | None, until: datetime | None) -> tuple[datetime, datetime]:
    """`from` inclusive, `to` exclusive, in UTC; the last 30 days by default."""
    end = aware(until) or datetime.now(UTC)
    start = aware(since) or end - DEFAULT_SPAN
    _check_span(start, end, MAX_SPAN)
    return start, end


def _check_split(group_by: GroupBy | None, split_by: GroupBy | None) -> None:
    if split_by is not None and (group_by is None or split_by == group_by):
        raise ApiError(
            VALIDATION,
            "`split_by` splits the groups of another `group_by`",
            errors=[FieldProblem(field="query.split_by", message="needs a different `group_by`")],
        )


def _check_span(start: datetime | date, end: datetime | date, longest: timedelta) -> None:
    if start >= end:
        raise ApiError(
            VALIDATION,
            "`from` must be before `to`",
            errors=[FieldProblem(field="query.from", message="not before `to`")],
        )
    if end - start > longest:  # type: ignore[operator]
        raise ApiError(
            VALIDATION,
            f"a report covers at most {longest.days} days",
            errors=[FieldProblem(field="query.to", message=f"more than {longest.days} days")],
        )


@router.get(
    "/api/v1/tenants/{tenant_id}/costs",
    summary="A tenant's costs, grouped",
    response_model=CostReport,
    responses={200: _CSV_DOC, **problems(401, 403, 404, 422)},
)
async def get_costs(
    tenant: TenantForCostView,
    reports: Reports,
    since: Annotated[Moment | None, Query(alias="from", description="Inclusive, UTC.")] = None,
    until: Annotated[Moment | None, Query(alias="to", description="Exclusive, UTC.")] = None,
    group_by: GroupBy | None = None,
    split_by: Annotated[
        GroupBy | None,
        Query(description="A second dimension within each group (`group_by=day&split_by=model`)."),
    ] = None,
    order: Annotated[
        CostOrder, Query(description="`key` (the default) or `cost`: the costliest first.")
    ] = "key",
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1_000,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    """Every priced or unpriced call recorded in the period, summed per `group_by` (model,
    UTC day, tool, task, user, agent or strategy; none: totals only) and within it per `split_by`,
    exact to 1e-12 USD. `totals` count every call of the period, also when `truncated` says
    groups were left out. `order=cost&limit=10` gives the ten costliest groups. Calls of tasks
    deleted since (retention, erasure) still count, by their UTC day (their task: `null`)."""
    start, end = _period(since, until)
    _check_split(group_by, split_by)
    costs = await reports.grouped(
        tenant,
        since=start,
        until=end,
        group_by=group_by,
        split_by=split_by,
        order=order,
        limit=limit,
    )
    items = [
        CostGroup(key=g.key, split=g.split, **Figures.of(g.totals).model_dump())
        for g in costs.groups
    ]
    report = CostReport(
        from_=start,
        to=end,
        group_by=group_by,
        split_by=split_by,
        order=order,
        groups=items,
        totals=Figures.of(costs.totals),
        truncated=costs.truncated,
    )
    if _wants_csv(accept):
        columns = [group_by or "key", *([split_by] if split_by else []), *FIGURES]
        rows = [
            [item.key, *([item.split] if split_by else []), *figures_of(item)] for item in items
        ]
        rows.append(["TOTAL", *([""] if split_by else []), *figures_of(report.totals)])
        return _csv(to_csv(columns, rows), f"costs-{tenant.id}.csv")
    return JSONResponse(report.model_dump(mode="json", by_alias=True))


@router.get(
    "/api/v1/tenants/{tenant_id}/usage",
    summary="A tenant's daily model usage",
    response_model=UsageReport,
    responses={200: _CSV_DOC, **problems(401, 403, 404, 422)},
)
async def get_usage(
    tenant: TenantForCostView,
    reports: Reports,
    since: Annotated[Day | None, Query(alias="from", description="Inclusive UTC day.")] = None,
    until: Annotated[Day | None, Query(alias="to", description="Exclusive UTC day.")] = None,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    """The daily roll-up of model calls (kept as calls are recorded): per day and model, per
    model, and in all."""
    end = until or datetime.now(UTC).date() + timedelta(days=1)
    start = since or end - DEFAULT_SPAN
    _check_span(start, end, MAX_SPAN)
    usage = await reports.usage(tenant, since=start, until=end)
    days = [
        UsageDay(day=r.day, model=r.model, **Figures.of(r.totals).model_dump()) for r in usage.days
    ]
    report = UsageReport(
        from_=start,
        to=end,
        days=days,
        models=[UsageModel(model=model, **Figures.of(t).model_dump()) for model, t in usage.models],
        totals=Figures.of(usage.totals),
    )
    if _wants_csv(accept):
        lines: list[list[object]] = [[d.day, d.model, *figures_of(d)] for d in days]
        lines.append(["TOTAL", "", *figures_of(report.totals)])
        return _csv(to_csv(["day", "model", *FIGURES], lines), f"usage-{tenant.id}.csv")
    return JSONResponse(report.model_dump(mode="json", by_alias=True))


_TASK_COLUMNS = [
    "step_id",
    "tool_name",
    "tool_type",
    "model",
    "deployment",
    "provider",
    "user_id",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "unpriced",
    "recorded_at",
]


@router.get(
    "/api/v1/tasks/{task_id}/costs",
    summary="A task's cost records",
    response_model=TaskCosts,
    responses={200: _CSV_DOC, **problems(401, 403, 404, 422)},
)
async def get_task_costs(
    task_id: UUID,
    caller: AnyCaller,
    state: State,
    reports: Reports,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    """One record per call that reported usage, in order, its sub-agents' tasks' calls
    included (each names its task); totals equal the chain's metrics, which count the
    sub-agents'. Needs `cost:view`, except for the task's own submitter."""
    task = await state.tasks.find(caller, task_id)
    costs = await reports.of_task(caller, task)
    items = [TaskCost.of(record) for record in costs.records]
    totals = Figures.of(costs.totals)
    if _wants_csv(accept):
        rows: list[list[object]] = [[getattr(i, c) for c in _TASK_COLUMNS] for i in items]
        blank = [""] * 7
        rows.append(
            ["TOTAL", *blank[1:], totals.input_tokens, totals.output_tokens, totals.cost_usd]
        )
        return _csv(to_csv(_TASK_COLUMNS, rows), f"task-{task.id}-costs.csv")
    body = TaskCosts(task_id=task.id, items=items, totals=totals)
    return JSONResponse(body.model_dump(mode="json"))
