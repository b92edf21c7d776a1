"""Idempotent submission: a submission with an idempotency key that the same caller already
made within the key's time answers with the task the first one made, and starts nothing.

Keys are per tenant and per caller (the principal's subject): one caller's key never finds
another caller's task, so two scripts of a tenant that happen to pick the same key each get
their own. The body is compared by a canonical hash of the validated submission (fields at
their defaults left out, keys sorted): a repeat whose body says something else is refused."""

import hashlib
import json
from datetime import datetime
from uuid import UUID

from app.errors import OmniForgeError
from app.runs.models import TaskSubmission


class IdempotencyKeyReused(OmniForgeError):
    """A key the caller used, within its time, for a submission with another body."""

    def __init__(self, task_id: UUID, expires_at: datetime) -> None:
        self.reason = (
            f"was used for another request (task {task_id}) until {expires_at.isoformat()}; "
            "use a new key for a new task"
        )
        super().__init__(f"the key {self.reason}")
        self.task_id = task_id
        self.expires_at = expires_at


def fingerprint(submission: TaskSubmission) -> str:
    """The SHA-256 of the submission as canonical JSON: what `same body` means."""
    document = submission.model_dump(mode="json", exclude_defaults=True)
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()
