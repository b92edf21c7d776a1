"""The ids a log line is about: the request that caused it, its tenant, the task and chain
whose run it belongs to. Context variables, so that they follow the asyncio task (and every
task it starts) without being passed around; the JSON log formatter reads them."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from uuid import UUID

_request_id: ContextVar[str | None] = ContextVar("omniforge_request_id", default=None)
_tenant_id: ContextVar[str | None] = ContextVar("omniforge_tenant_id", default=None)
_task_id: ContextVar[str | None] = ContextVar("omniforge_task_id", default=None)
_chain_id: ContextVar[str | None] = ContextVar("omniforge_chain_id", default=None)

_VARIABLES = {
    "request_id": _request_id,
    "tenant_id": _tenant_id,
    "task_id": _task_id,
    "chain_id": _chain_id,
}


def log_ids() -> dict[str, str]:
    """The ids known where this is called, by their log field names."""
    ids: dict[str, str] = {}
    for name, variable in _VARIABLES.items():
        value = variable.get()
        if value is not None:
            ids[name] = value
    return ids


@contextmanager
def request_logged_as(request_id: str) -> Iterator[None]:
    """Lines logged within the block (and by tasks started in it) carry `request_id`."""
    token = _request_id.set(request_id)
    try:
        yield
    finally:
        _request_id.reset(token)


@contextmanager
def tenant_logged_as(tenant_id: str) -> Iterator[None]:
    token = _tenant_id.set(tenant_id)
    try:
        yield
    finally:
        _tenant_id.reset(token)


def bind_run(tenant_id: str, task_id: UUID, chain_id: UUID) -> Callable[[], None]:
    """Lines logged from here (and by the tasks started from here: a run's own) carry the
    run's ids, and not the request's: a run outlives the request that submitted it. Returns
    what restores the ids before, to be called in the same task."""
    tokens = [
        (_request_id, _request_id.set(None)),
        (_tenant_id, _tenant_id.set(tenant_id)),
        (_task_id, _task_id.set(str(task_id))),
        (_chain_id, _chain_id.set(str(chain_id))),
    ]

    def unbind() -> None:
        for variable, token in reversed(tokens):
            variable.reset(token)

    return unbind
