"""Postgres: a whole group of run writes in one statement, one round trip, fenced per run.

Under load every round trip waits for the event loop as well as for the server, so the five of
a transaction (BEGIN, two updates, an insert, COMMIT) cost several times one. Here every row of
the group travels as one JSON document, and data-modifying CTEs apply it in a single atomic
statement. Stored step documents are spliced in as they are, never decoded. Changes only ever
fill a column or move it forward, so a missing value keeps what is stored (COALESCE).

The fence: a run's task row is updated only where the run still holds it (its runner and the
epoch of its claim) and its stored events end where the write begins; every other row of the
run (steps, events, costs, audits, deliveries, its chain, the daily roll-up) is written only
if that update was. The statement returns the tasks it updated: any other was refused whole.
Column types come from the tables (`postgres_types`), so a column added to a table reaches
the group write with its type.
"""

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from sqlalchemy import Table, TextClause, text

from app.storage.notify import QUEUE
from app.storage.runs.rows import RUN_CHAIN_COLUMNS, RUN_TASK_COLUMNS, RunWrite, postgres_types
from app.storage.tables import (
    audit_events,
    cost_records,
    model_usage,
    reasoning_chains,
    reasoning_steps,
    task_events,
    tasks,
    webhook_deliveries,
)
from app.storage.text import storable_json
from app.storage.types import RawJSON

FENCE = {"row_id": "uuid", "runner_id": "varchar", "epoch": "int", "after_seq": "int"}
"""What each task entry of the document carries besides its changes: the run's hold on it."""

TASK_KEY = {"task_id": "uuid"}
"""What rows of tables without a `task_id` carry to say whose run wrote them (audit rows of
requests carry null: they are nobody's run, and always written)."""

USAGE_SUMS = ("calls", "input_tokens", "output_tokens", "cost_usd", "unpriced_calls")
DELIVERY_COLUMNS = (
    "id",
    "tenant_id",
    "endpoint_id",
    "url",
    "task_id",
    "event",
    "payload",
    "status",
    "attempts",
    "next_attempt_at",
    "created_at",
)
"""The columns of an outbox row as a run stages it (the rest are the dispatcher's)."""

# Items per notice payload: `<uuid>:<seq>` is at most 47 bytes, and payloads stay under 8,000.
_NOTES_PER_PAYLOAD = 150


def _record_type(columns: Mapping[str, str]) -> str:
    return ", ".join(f'"{name}" {kind}' for name, kind in columns.items())


def _fenced_tasks() -> str:
    columns = postgres_types(tasks, RUN_TASK_COLUMNS)
    assignments = ", ".join(
        f'"{name}" = v."{name}"'
        if name == "last_seq"
        else f'"{name}" = COALESCE(v."{name}", tasks."{name}")'
        for name in columns
    )
    return (
        f"UPDATE tasks SET {assignments} "
        f"FROM payload, jsonb_to_recordset(payload.doc->'tasks') AS v("
        f"{_record_type({**FENCE, **columns})}) "
        "WHERE tasks.id = v.row_id AND tasks.runner_id = v.runner_id "
        "AND tasks.owner_epoch = v.epoch AND tasks.last_seq = v.after_seq "
        "RETURNING tasks.id, tasks.last_seq"
    )


def _fenced_chains() -> str:
    columns = postgres_types(reasoning_chains, RUN_CHAIN_COLUMNS)
    assignments = ", ".join(
        f'"{name}" = COALESCE(v."{name}", reasoning_chains."{name}")' for name in columns
    )
    record = _record_type({"row_id": "uuid", **TASK_KEY, **columns})
    return (
        f"UPDATE reasoning_chains SET {assignments} "
        f"FROM payload, jsonb_to_recordset(payload.doc->'chains') AS v({record}) "
        "WHERE reasoning_chains.id = v.row_id AND v.task_id IN (SELECT id FROM t) RETURNING 1"
    )


def _fenced_insert(
    table: str,
    key: str,
    columns: Mapping[str, str],
    *,
    returning: str = "1",
    requests_too: bool = False,
) -> str:
    """Inserts the rows of the document's `key` whose run's task was updated (`t`); with
    `requests_too`, also those of no run (a null `task_id`)."""
    names = ", ".join(f'"{name}"' for name in columns)
    record = _record_type(columns if "task_id" in columns else {**TASK_KEY, **columns})
    condition = "v.task_id IN (SELECT id FROM t)"
    if requests_too:
        condition = f"(v.task_id IS NULL OR {condition})"
    return (
        f"INSERT INTO {table} ({names}) SELECT {names} "
        f"FROM payload, jsonb_to_recordset(payload.doc->'{key}') AS v({record}) "
        f"WHERE {condition} RETURNING {returning}"
    )


def _usage_from_costs() -> str:
    """Adds the model calls just recorded (`k`) to the daily roll-up, summed per (tenant, UTC
    day, model) and sorted by that key, so each row is touched once and concurrent writers
    lock in one order."""
    names = ", ".join(f'"{name}"' for name in postgres_types(model_usage))
    sums = ", ".join(f'"{n}" = model_usage."{n}" + excluded."{n}"' for n in USAGE_SUMS)
    return (
        f"INSERT INTO model_usage ({names}) "
        "SELECT tenant_id, (recorded_at AT TIME ZONE 'UTC')::date, model, count(*), "
        "sum(input_tokens), sum(output_tokens), COALESCE(sum(cost_usd), 0), "
        "count(*) FILTER (WHERE unpriced), CAST(:now AS timestamptz) "
        "FROM k WHERE model IS NOT NULL GROUP BY 1, 2, 3 ORDER BY 1, 2, 3 "
        f'ON CONFLICT ("tenant_id", "day", "model") DO UPDATE SET {sums}, '
        '"updated_at" = excluded."updated_at" RETURNING 1'
    )


def _statement(*, deliveries: bool) -> TextClause:
    cost_columns = postgres_types(cost_records)
    parts = [
        "payload AS (SELECT CAST(:doc AS jsonb) AS doc)",
        f"t AS ({_fenced_tasks()})",
        f"c AS ({_fenced_chains()})",
        f"s AS ({_fenced_insert('reasoning_steps', 'steps', postgres_types(reasoning_steps))})",
        f"e AS ({_fenced_insert('task_events', 'events', postgres_types(task_events))})",
        f"k AS ({_fenced_insert('cost_records', 'costs', cost_columns, returning='*')})",
        "a AS ("
        + _fenced_insert("audit_events", "audits", postgres_types(audit_events), requests_too=True)
        + ")",
        f"u AS ({_usage_from_costs()})",
        # Other instances following these runs learn (ids and positions only) at COMMIT.
        "n AS (SELECT pg_notify('omniforge_events', string_agg(note, ',')) FROM ("
        "SELECT t.id::text || ':' || t.last_seq::text AS note, "
        f"(row_number() OVER ()) / {_NOTES_PER_PAYLOAD} AS part FROM t) AS notes GROUP BY part)",
    ]
    last = "SELECT ARRAY(SELECT id FROM t), (SELECT count(*) FROM n)"
    if deliveries:
        outbox = postgres_types(webhook_deliveries, DELIVERY_COLUMNS)
        parts += [
            f"w AS ({_fenced_insert('webhook_deliveries', 'deliveries', outbox)})",
            # The dispatchers of every instance learn at COMMIT that deliveries are due.
            "wn AS (SELECT pg_notify('omniforge_webhooks', '') WHERE EXISTS (SELECT 1 FROM w))",
        ]
        last += ", (SELECT count(*) FROM wn)"
    return text(f"WITH {', '.join(parts)} {last}")


GROUP_WRITE = _statement(deliveries=False)
GROUP_WRITE_WITH_DELIVERIES = _statement(deliveries=True)
"""`GROUP_WRITE` with the webhook outbox's rows of the group (`deliveries`): only groups that
have some pay for it."""


# `json.dumps` with arguments builds an encoder per call; these are built once. Strings (most
# values) take the C string encoder directly, as `json.dumps` itself does.
_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
_string: Callable[[str], str] = json.encoder.encode_basestring
_keys: dict[str, str] = {}


def _value(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if isinstance(value, RawJSON):
        return value  # already JSON: spliced, not encoded again
    if isinstance(value, datetime | date):
        return f'"{value.isoformat()}"'
    if isinstance(value, UUID):
        return f'"{value}"'
    if isinstance(value, Decimal):
        return str(value)  # a JSON number: exact in jsonb
    return _encode(value)


def _key(name: str) -> str:
    """A column's name as a JSON member's, with its colon: a handful of names, each once."""
    member = _keys.get(name)
    if member is None:
        member = _keys[name] = _string(name) + ":"
    return member


def _rows(rows: Iterable[Mapping[str, Any]], key: str = "") -> str:
    """Rows as JSON objects, each opened with `key` (a member naming the row's run) if any."""
    return ",".join(
        "{" + key + ",".join(_key(k) + _value(v) for k, v in row.items()) + "}" for row in rows
    )


def _run_key(task_id: UUID) -> str:
    return f'"task_id":"{task_id}",'


def group_document(
    task_entries: Sequence[Mapping[str, Any]],
    chain_entries: Sequence[Mapping[str, Any]],
    writes: Sequence[RunWrite],
    audits: Sequence[Mapping[str, Any]],
) -> str:
    """The JSON document `GROUP_WRITE` applies, storable (see `app.storage.text`): task
    entries with their fence (`FENCE`) and changes, chain entries with their task, the rows
    of `writes` (steps and audits with the `task_id` of the run that wrote them) and audit
    rows of requests (`audits`, with none)."""
    steps = ",".join(_rows(w.steps, _run_key(w.task_id)) for w in writes if w.steps)
    events = ",".join(_rows(w.events) for w in writes if w.events)
    costs = ",".join(_rows(w.costs) for w in writes if w.costs)
    run_audits = [_rows(w.audits, _run_key(w.task_id)) for w in writes if w.audits]
    all_audits = ",".join([*run_audits, _rows(audits)] if audits else run_audits)
    deliveries = ",".join(_rows(w.deliveries) for w in writes if w.deliveries)
    return storable_json(
        f'{{"tasks":[{_rows(task_entries)}],"chains":[{_rows(chain_entries)}],'
        f'"steps":[{steps}],"events":[{events}],"costs":[{costs}],'
        f'"audits":[{all_audits}],"deliveries":[{deliveries}]}}'
    )


@functools.cache
def creation(
    task_columns: tuple[str, ...], chain_columns: tuple[str, ...], *, queued: bool
) -> TextClause:
    """A new task and its chain in one statement, one round trip (not BEGIN, two inserts and
    COMMIT): the document's `task` and `chain` objects, with exactly these columns (the rest
    keep their defaults); a task stored `queued` announces itself (`QUEUE`) at COMMIT."""

    def inserted(table: Table, key: str, names: tuple[str, ...]) -> str:
        listed = ", ".join(f'"{name}"' for name in names)
        record = _record_type(postgres_types(table, names))
        return (
            f"INSERT INTO {table.name} ({listed}) SELECT {listed} "
            f"FROM payload, jsonb_to_record(payload.doc->'{key}') AS v({record}) RETURNING 1"
        )

    parts = [
        "payload AS (SELECT CAST(:doc AS jsonb) AS doc)",
        f"t AS ({inserted(tasks, 'task', task_columns)})",
        f"c AS ({inserted(reasoning_chains, 'chain', chain_columns)})",
    ]
    last = "SELECT (SELECT count(*) FROM t) + (SELECT count(*) FROM c)"
    if queued:
        parts.append(f"n AS (SELECT pg_notify('{QUEUE}', ''))")
        last += " + (SELECT count(*) FROM n)"
    return text(f"WITH {', '.join(parts)} {last}")


def creation_document(task: Mapping[str, Any], chain: Mapping[str, Any]) -> str:
    """The document `creation` stores, storable (see `app.storage.text`)."""
    return storable_json(f'{{"task":{_rows([task])},"chain":{_rows([chain])}}}')
