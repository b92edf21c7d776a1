"""Postgres: a whole group of run writes in one statement, one round trip.

Under load every round trip waits for the event loop as well as for the server, so the five of
a transaction (BEGIN, two updates, an insert, COMMIT) cost several times one. Here every row of
the group travels as one JSON document, and data-modifying CTEs apply it in a single atomic
statement. Stored step documents are spliced in as they are, never decoded. Changes only ever
fill a column or move it forward, so a missing value keeps what is stored (COALESCE).
"""

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from sqlalchemy import text

from app.storage.text import storable_json
from app.storage.types import RawJSON

_TASK_COLUMNS = {
    "last_seq": "int",
    "status": "varchar",
    "started_at": "timestamptz",
    "final_answer": "text",
    "error_code": "varchar",
    "error_message": "text",
    "finished_at": "timestamptz",
    "output": "jsonb",
    "stop_reason": "varchar",
    "replay_report": "jsonb",
}
_CHAIN_COLUMNS = {
    "status": "varchar",
    "metrics": "jsonb",
    "error_code": "varchar",
    "error_message": "text",
    "completed_at": "timestamptz",
}
_STEP_COLUMNS = {
    "chain_id": "uuid",
    "step_number": "int",
    "id": "uuid",
    "tenant_id": "varchar",
    "seq": "int",
    "type": "varchar",
    "tool_type": "varchar",
    "tool_name": "varchar",
    "visibility": "varchar",
    "timestamp": "timestamptz",
    "data": "jsonb",
    "metrics": "jsonb",
}
_EVENT_COLUMNS = {
    "task_id": "uuid",
    "seq": "int",
    "tenant_id": "varchar",
    "type": "varchar",
    "data": "jsonb",
}
_COST_COLUMNS = {
    "tenant_id": "varchar",
    "user_id": "varchar",
    "task_id": "uuid",
    "chain_id": "uuid",
    "step_id": "uuid",
    "correlation_id": "uuid",
    "tool_name": "varchar",
    "tool_type": "varchar",
    "model": "varchar",
    "deployment": "varchar",
    "provider": "varchar",
    "input_tokens": "int",
    "output_tokens": "int",
    "cost_usd": "numeric",
    "unpriced": "boolean",
    "recorded_at": "timestamptz",
}
_AUDIT_COLUMNS = {
    "tenant_id": "varchar",
    "actor": "varchar",
    "action": "varchar",
    "resource_type": "varchar",
    "resource_id": "varchar",
    "details": "jsonb",
    "created_at": "timestamptz",
}


_USAGE_COLUMNS = {
    "tenant_id": "varchar",
    "day": "date",
    "model": "varchar",
    "calls": "int",
    "input_tokens": "bigint",
    "output_tokens": "bigint",
    "cost_usd": "numeric",
    "unpriced_calls": "int",
    "updated_at": "timestamptz",
}
USAGE_SUMS = ("calls", "input_tokens", "output_tokens", "cost_usd", "unpriced_calls")


def _record_type(columns: Mapping[str, str]) -> str:
    return ", ".join(f'"{name}" {kind}' for name, kind in columns.items())


def _update(table: str, key: str, columns: Mapping[str, str], always: Iterable[str] = ()) -> str:
    assignments = ", ".join(
        f'"{name}" = v."{name}"'
        if name in always
        else f'"{name}" = COALESCE(v."{name}", {table}."{name}")'
        for name in columns
    )
    record = _record_type({"row_id": "uuid", **columns})
    return (
        f"UPDATE {table} SET {assignments} "
        f"FROM payload, jsonb_to_recordset(payload.doc->'{key}') AS v({record}) "
        f"WHERE {table}.id = v.row_id RETURNING 1"
    )


def _insert(table: str, key: str, columns: Mapping[str, str]) -> str:
    names = ", ".join(f'"{name}"' for name in columns)
    return (
        f"INSERT INTO {table} ({names}) SELECT {names} "
        f"FROM payload, jsonb_to_recordset(payload.doc->'{key}') AS v({_record_type(columns)}) "
        "RETURNING 1"
    )


def _upsert_usage() -> str:
    """Adds a group's per-(tenant, day, model) sums to the daily roll-up; the rows come
    aggregated and sorted, so each is touched once and concurrent writers lock in one order."""
    names = ", ".join(f'"{name}"' for name in _USAGE_COLUMNS)
    sums = ", ".join(f'"{n}" = model_usage."{n}" + excluded."{n}"' for n in USAGE_SUMS)
    return (
        f"INSERT INTO model_usage ({names}) SELECT {names} "
        f"FROM payload, jsonb_to_recordset(payload.doc->'usage') AS v("
        f"{_record_type(_USAGE_COLUMNS)}) "
        f'ON CONFLICT ("tenant_id", "day", "model") DO UPDATE SET {sums}, '
        '"updated_at" = excluded."updated_at" RETURNING 1'
    )


GROUP_WRITE = text(
    "WITH payload AS (SELECT CAST(:doc AS jsonb) AS doc), "
    f"t AS ({_update('tasks', 'tasks', _TASK_COLUMNS, always=('last_seq',))}), "
    f"c AS ({_update('reasoning_chains', 'chains', _CHAIN_COLUMNS)}), "
    f"s AS ({_insert('reasoning_steps', 'steps', _STEP_COLUMNS)}), "
    f"e AS ({_insert('task_events', 'events', _EVENT_COLUMNS)}), "
    f"k AS ({_insert('cost_records', 'costs', _COST_COLUMNS)}), "
    f"a AS ({_insert('audit_events', 'audits', _AUDIT_COLUMNS)}), "
    f"u AS ({_upsert_usage()}), "
    # Other instances following these runs learn (ids and positions only) at COMMIT.
    "n AS (SELECT pg_notify('omniforge_events', note) "
    "FROM unnest(CAST(:notes AS text[])) AS note) "
    "SELECT (SELECT count(*) FROM t), (SELECT count(*) FROM s), (SELECT count(*) FROM e), "
    "(SELECT count(*) FROM n)"
)

_DELIVERY_COLUMNS = {
    "id": "uuid",
    "tenant_id": "varchar",
    "endpoint_id": "uuid",
    "url": "text",
    "task_id": "uuid",
    "event": "varchar",
    "payload": "text",
    "status": "varchar",
    "attempts": "int",
    "next_attempt_at": "timestamptz",
    "created_at": "timestamptz",
}
_LAST_SELECT = "SELECT (SELECT count(*) FROM t), "
assert GROUP_WRITE.text.count(_LAST_SELECT) == 1
GROUP_WRITE_WITH_DELIVERIES = text(
    GROUP_WRITE.text.replace(
        _LAST_SELECT,
        f", w AS ({_insert('webhook_deliveries', 'deliveries', _DELIVERY_COLUMNS)}), "
        # The dispatchers of every instance learn at COMMIT that deliveries are due.
        "wn AS (SELECT pg_notify('omniforge_webhooks', '') WHERE EXISTS (SELECT 1 FROM w)) "
        "SELECT (SELECT count(*) FROM t), (SELECT count(*) FROM wn), ",
    )
)
"""`GROUP_WRITE` with the webhook outbox's rows of the group (`deliveries`): only groups that
have some pay for it."""


def _value(value: Any) -> str:
    if isinstance(value, RawJSON):
        return value  # already JSON: spliced, not encoded again
    if isinstance(value, datetime | date):
        return f'"{value.isoformat()}"'
    if isinstance(value, UUID):
        return f'"{value}"'
    if isinstance(value, Decimal):
        return str(value)  # a JSON number: exact in jsonb
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _rows(rows: Iterable[Mapping[str, Any]]) -> str:
    return ",".join(
        "{" + ",".join(f"{json.dumps(k)}:{_value(v)}" for k, v in row.items()) + "}" for row in rows
    )


def group_document(
    task_changes: Mapping[UUID, Mapping[str, Any]],
    chain_changes: Mapping[UUID, Mapping[str, Any]],
    steps: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    costs: Sequence[Mapping[str, Any]],
    audits: Sequence[Mapping[str, Any]],
    usage: Sequence[Mapping[str, Any]] = (),
    deliveries: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The JSON document `GROUP_WRITE` applies, storable (see `app.storage.text`)."""
    tasks = _rows({"row_id": key, **values} for key, values in sorted(task_changes.items()))
    chains = _rows({"row_id": key, **values} for key, values in sorted(chain_changes.items()))
    return storable_json(
        f'{{"tasks":[{tasks}],"chains":[{chains}],"steps":[{_rows(steps)}],'
        f'"events":[{_rows(events)}],"costs":[{_rows(costs)}],"audits":[{_rows(audits)}],'
        f'"usage":[{_rows(usage)}],"deliveries":[{_rows(deliveries)}]}}'
    )


def daily_usage(costs: Iterable[Mapping[str, Any]], at: datetime) -> list[dict[str, Any]]:
    """The `model_usage` increments of cost records: model calls summed per (tenant, UTC day,
    model), sorted by that key."""
    sums: dict[tuple[str, date, str], dict[str, Any]] = {}
    for cost in costs:
        model = cost["model"]
        if model is None:
            continue
        key = (cost["tenant_id"], cost["recorded_at"].astimezone(UTC).date(), model)
        row = sums.setdefault(
            key,
            {
                "tenant_id": key[0],
                "day": key[1],
                "model": model,
                "calls": 0,
                "input_tokens": 0,
                "output_tokens": 0,
                "cost_usd": Decimal(0),
                "unpriced_calls": 0,
                "updated_at": at,
            },
        )
        row["calls"] += 1
        row["input_tokens"] += cost["input_tokens"]
        row["output_tokens"] += cost["output_tokens"]
        if cost["cost_usd"] is not None:
            row["cost_usd"] += cost["cost_usd"]
        if cost["unpriced"]:
            row["unpriced_calls"] += 1
    return [sums[key] for key in sorted(sums)]
