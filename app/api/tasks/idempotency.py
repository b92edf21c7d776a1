"""Idempotent submission: a submission with an `Idempotency-Key` that the same caller already
made within the key's time answers with the task the first one made, and starts nothing.

Keys are per tenant and per caller (the principal's subject): one caller's key never finds
another caller's task, so two scripts of a tenant that happen to pick the same key each get
their own. The body is compared by a canonical hash of the validated submission (fields at
their defaults left out, keys sorted): a repeat whose body says something else is refused."""

import hashlib
import json
from datetime import timedelta

from app.api.errors import IDEMPOTENCY_KEY_REUSED, ApiError, FieldProblem
from app.api.state import AppState
from app.api.tasks.service import submit_task
from app.chain.models import utc_now
from app.governance.callers import Caller
from app.runs import TaskSubmission
from app.runs.manager import SubmittedTask
from app.storage.idempotency import IdempotencyKeys, KeyClaim, KeyTaken
from app.storage.tasks import TaskRepository

IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,255}$"
"""Visible ASCII, up to 255 characters (a UUID is the usual choice)."""
REPLAYED_HEADER = "Idempotent-Replayed"

# A duplicate that lost the race reads the winner's key after it committed; should that key
# expire in between, the submission is simply tried again.
_ATTEMPTS = 3


def fingerprint(submission: TaskSubmission) -> str:
    """The SHA-256 of the submission as canonical JSON: what `same body` means."""
    document = submission.model_dump(mode="json", exclude_defaults=True)
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


async def submit_once(
    state: AppState, caller: Caller, submission: TaskSubmission, key: str
) -> tuple[SubmittedTask, bool]:
    """The task of this key: the one a first submission with it made (True: a repeat), or a
    new one stored with the key in its own transaction (False). A concurrent duplicate waits
    for the first to be stored and then answers with its task."""
    digest = fingerprint(submission)
    for _ in range(_ATTEMPTS):
        earlier = await _earlier(state, caller, key, digest)
        if earlier is not None:
            return earlier, True
        now = utc_now()
        ttl = timedelta(seconds=state.settings.idempotency_key_ttl_s)
        claim = KeyClaim(caller.subject, key, digest, now, now + ttl)
        try:
            return await submit_task(state, caller, submission, idempotency=claim), False
        except KeyTaken:
            continue
    raise RuntimeError(f"idempotency key {key!r} was neither found nor claimable")


async def _earlier(state: AppState, caller: Caller, key: str, digest: str) -> SubmittedTask | None:
    async with state.database.read() as connection:
        found = await IdempotencyKeys(connection, caller.tenant_id).find(
            caller.subject, key, now=utc_now()
        )
        task = (
            None
            if found is None
            else await TaskRepository(connection, caller.tenant_id).get(found.task_id)
        )
    if found is None or task is None:
        return None
    if found.request_sha256 != digest:
        raise ApiError(
            IDEMPOTENCY_KEY_REUSED,
            f"this {IDEMPOTENCY_KEY_HEADER} was used for another request (task {task.id}) "
            f"until {found.expires_at.isoformat()}; use a new key for a new task",
            errors=[
                FieldProblem(
                    field=f"header.{IDEMPOTENCY_KEY_HEADER}",
                    message="already used with a different body",
                )
            ],
        )
    return SubmittedTask(task.id, task.chain_id, task.status)
