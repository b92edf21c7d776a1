"""What can go wrong with a task, in domain terms (the API maps these to HTTP)."""

from uuid import UUID

from app.errors import OmniForgeError
from app.tools.errors import FieldError


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


class NotFound(OmniForgeError):
    """No such resource in the caller's tenant (another tenant's ids are not found either)."""

    def __init__(self, kind: str, resource_id: object) -> None:
        super().__init__(f"{kind} {resource_id} not found")
        self.kind = kind
        self.resource_id = resource_id


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


class Forbidden(OmniForgeError):
    """The caller is known but may not do this; `permission` names what it lacks."""

    def __init__(self, message: str, *, permission: str | None = None) -> None:
        super().__init__(message)
        self.permission = permission


class TenantRefused(OmniForgeError):
    """A token names a tenant that does not exist or is disabled."""

    def __init__(self, tenant_id: str, *, disabled: bool) -> None:
        state = "is disabled" if disabled else "does not exist"
        super().__init__(f"the token's tenant {tenant_id!r} {state}")
        self.tenant_id = tenant_id
        self.disabled = disabled
