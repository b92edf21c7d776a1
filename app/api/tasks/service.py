"""Task operations on behalf of a caller, each within the caller's tenant."""

from collections.abc import AsyncIterator, Sequence
from uuid import UUID

from app.api.access import Caller
from app.api.auditing import chain_read
from app.api.errors import VALIDATION, ApiError, FieldProblem
from app.api.state import AppState
from app.governance.audit import AuditAction
from app.runs import TaskSubmission
from app.runs.agents import parse_ref, resolve_agent
from app.runs.channel import StreamItem
from app.runs.errors import Forbidden, InvalidSubmission, NotFound, TaskAlreadyFinished
from app.runs.manager import SubmittedTask, Turn
from app.runs.models import MAX_CONVERSATION_FILES, Attachment, RunPolicy
from app.runs.streams import task_stream
from app.security.rbac import Permission, cancels_any_task
from app.storage.conversations import ConversationRepository
from app.storage.records import ConversationRecord, TaskRecord
from app.storage.run_log import ConversationBusy
from app.storage.tasks import TaskRepository
from app.tools.errors import FieldError


async def submit_task(state: AppState, caller: Caller, submission: TaskSubmission) -> SubmittedTask:
    """Resolves the task's agent (and, for a conversation's turn, its history), then starts
    it. A conversation's turn runs the conversation's agent unless the task pins another
    version of it."""
    turn: Turn | None = None
    ref = submission.agent
    conversation_files: list[UUID] = []
    async with state.database.read() as connection:
        if submission.conversation_id is not None:
            conversation = await ConversationRepository(connection, caller.tenant_id).get(
                submission.conversation_id
            )
            if conversation is None:
                raise NotFound("conversation", submission.conversation_id)
            if conversation.user_id != caller.subject and not cancels_any_task(caller.roles):
                raise Forbidden(
                    "members add turns only to their own conversations; this one is another user's",
                    permission=Permission.TASK_CREATE,
                )
            ref = _turn_agent(conversation, ref)
            history = await state.runs.histories.history(
                connection, caller.tenant_id, conversation.id, conversation.turns
            )
            if history.running is not None:
                raise ConversationBusy(
                    conversation.id, history.running, f"turn task {history.running} is running"
                )
            turn = Turn(conversation.id, history.turns, history.messages)
            conversation_files = conversation.file_ids
        agent = await resolve_agent(connection, caller.tenant_id, ref)
    attachments = await attached_files(
        state, caller, submission.file_ids or [], given=conversation_files
    )
    return await state.runs.submit(
        caller.principal, submission, await run_policy(state, caller), agent, turn, attachments
    )


async def attached_files(
    state: AppState, caller: Caller, file_ids: list[UUID], *, given: Sequence[UUID] = ()
) -> list[Attachment]:
    """The files a request names (`file_ids`, each its tenant's: 422 naming the field
    otherwise, as another tenant's file is as unknown as one that never existed) after those
    it was `given` before (a conversation's: any deleted since drop out)."""
    wanted = list(dict.fromkeys([*given, *file_ids]))
    if not wanted:
        return []
    library = state.toolbox.files
    records = (
        {}
        if library is None
        else {record.id: record for record in await library.get_many(caller.tenant_id, wanted)}
    )
    problems = [
        FieldError(f"file_ids.{index}", f"no file {file_id} in this tenant")
        for index, file_id in enumerate(file_ids)
        if file_id not in records
    ]
    found = [file_id for file_id in wanted if file_id in records]
    if len(found) > MAX_CONVERSATION_FILES:
        problems.append(
            FieldError(
                "file_ids",
                f"{len(found)} files in all with those given before; a conversation's turns "
                f"may read at most {MAX_CONVERSATION_FILES}",
            )
        )
    if problems:
        raise InvalidSubmission(problems)
    return [
        Attachment(
            file_id,
            f"{file_id}: {records[file_id].name} ({records[file_id].media_type}, "
            f"{records[file_id].size_bytes} bytes)",
        )
        for file_id in found
    ]


def _turn_agent(conversation: ConversationRecord, ref: str | None) -> str:
    """The agent a turn runs: the conversation's (pinned or newest), or a version of it the
    task names; another agent is refused."""
    if ref is None:
        return conversation.agent_ref
    name, _ = parse_ref(ref)
    if name != conversation.agent_name:
        raise InvalidSubmission(
            [
                FieldError(
                    "agent",
                    f"the conversation talks to agent {conversation.agent_name!r}; a turn may "
                    "name a version of it, not another agent",
                )
            ]
        )
    return ref


async def run_policy(state: AppState, caller: Caller) -> RunPolicy:
    tenant = caller.tenant
    return RunPolicy(
        roles=caller.roles,
        enabled_tools=tenant.enabled_tools,
        sensitive_fields=frozenset(tenant.visibility.sensitive_fields),
        quotas=tenant.quotas,
        models=tenant.models,
        tools=await state.toolbox.for_tenant(tenant),
        executes_tools=Permission.TOOL_EXECUTE in caller.permissions,
        key_quotas=None if caller.api_key is None else caller.api_key.quotas,
        key_scope=None if caller.api_key is None else caller.api_key.scope,
    )


async def find_task(state: AppState, caller: Caller, task_id: UUID) -> TaskRecord:
    """The caller's task, on a short connection of its own (streams must not hold one)."""
    async with state.database.read() as connection:
        task = await TaskRepository(connection, caller.tenant_id).get(task_id)
    if task is None:
        raise NotFound("task", task_id)
    return task


async def open_stream(
    state: AppState, caller: Caller, task: TaskRecord, *, after: int
) -> AsyncIterator[StreamItem]:
    """The task's stream as this caller may see it; the opening is audited first."""
    view = caller.view(state)
    row = chain_read(
        caller,
        action=AuditAction.CHAIN_STREAM,
        chain_id=task.chain_id,
        task_id=task.id,
        view=view,
        after=after,
    )
    # Streams open often and must start at once: the row is stored with the next write.
    state.runs.queue_audit([row])
    return task_stream(
        state.runs,
        state.run_log,
        task.id,
        task.tenant_id,
        task.chain_id,
        after=after,
        keepalive_s=state.settings.sse_keepalive_s,
        view=view,
    )


async def cancel_task(state: AppState, caller: Caller, task_id: UUID) -> TaskRecord:
    """Stops the run and returns the task once its end is stored. Members cancel their own
    tasks; tenant admins any task of the tenant."""
    task = await find_task(state, caller, task_id)
    if task.user_id != caller.subject and not cancels_any_task(caller.roles):
        raise Forbidden(
            "members cancel only their own tasks; this one is another user's",
            permission=Permission.TASK_CANCEL,
        )
    if task.is_finished:
        raise TaskAlreadyFinished(task.id, task.status)
    if not await state.runs.cancel(task, f"cancelled by {caller.subject}"):
        # It reached its end on its own before the cancel could stop it.
        ended = await find_task(state, caller, task_id)
        raise TaskAlreadyFinished(ended.id, ended.status)
    return await find_task(state, caller, task_id)


MAX_SEQ = 2**31 - 1
"""Event ids and step numbers are 32-bit on every backend."""


def stream_position(last_event_id: str | None, after: int | None) -> int:
    """Where a subscriber resumes: `Last-Event-ID` (what a reconnecting EventSource sends)
    wins over `?after=`; 0 replays everything."""
    if last_event_id is not None and last_event_id.strip():
        value = last_event_id.strip()
        # Length first: Python refuses to convert thousands of digits at all.
        digits = value.isascii() and value.isdecimal() and len(value) <= len(str(MAX_SEQ))
        if not (digits and int(value) <= MAX_SEQ):
            raise ApiError(
                VALIDATION,
                "Last-Event-ID must be an event id of this stream",
                errors=[FieldProblem(field="header.Last-Event-ID", message="not an event id")],
            )
        return int(value)
    return after or 0
