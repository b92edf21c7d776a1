"""What can go wrong with a task, in domain terms (the API maps these to HTTP)."""

from uuid import UUID

from app.errors import Forbidden, NotFound, OmniForgeError
from app.tools.errors import FieldError

__all__ = [
    "Forbidden",
    "InvalidSubmission",
    "ModelNotApproved",
    "NotFound",
    "TaskAlreadyFinished",
    "TenantRefused",
    "ToolsNotPermitted",
]


class InvalidSubmission(OmniForgeError):
    """A task the service cannot run as submitted (unknown model, unknown tools...)."""

    def __init__(self, problems: list[FieldError]) -> None:
        super().__init__("; ".join(str(problem) for problem in problems))
        self.problems = problems


class TaskAlreadyFinished(OmniForgeError):
    def __init__(self, task_id: UUID, status: str) -> None:
        super().__init__(f"task {task_id} has already finished ({status})")
        self.task_id = task_id
        self.status = status


class ModelNotApproved(InvalidSubmission):
    """The task names (or its tenant defaults to) a model its tenant did not approve."""

    def __init__(self, model: str, approved: list[str]) -> None:
        listed = ", ".join(approved) or "none"
        super().__init__(
            [FieldError("model", f"model {model!r} is not approved; approved: {listed}")]
        )
        self.model = model
        self.approved = approved


class ToolsNotPermitted(InvalidSubmission):
    """The task names tools its caller's roles may not use."""


class TenantRefused(OmniForgeError):
    """A token names a tenant that does not exist or is disabled."""

    def __init__(self, tenant_id: str, *, disabled: bool) -> None:
        state = "is disabled" if disabled else "does not exist"
        super().__init__(f"the token's tenant {tenant_id!r} {state}")
        self.tenant_id = tenant_id
        self.disabled = disabled
