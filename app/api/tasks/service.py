"""Task operations on behalf of a caller, each within the caller's tenant."""

from collections.abc import AsyncIterator, Sequence
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.api.errors import VALIDATION, ApiError, FieldProblem
from app.api.state import AppState
from app.api.webhooks.service import check_task_webhook, subscriptions_of
from app.governance.api_keys import KeyGrant
from app.governance.audit import AuditAction
from app.governance.auditing import chain_read
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.runs import TaskSubmission
from app.runs.admission import Turn
from app.runs.agents import agent_version, parse_ref, resolve_agent
from app.runs.channel import StreamItem
from app.runs.conversations import history_before
from app.runs.earlier_turns import learn_earlier_turns, repeats_earlier_turns
from app.runs.errors import Forbidden, InvalidSubmission, NotFound, TaskAlreadyFinished
from app.runs.manager import SubmittedTask
from app.runs.models import MAX_CONVERSATION_FILES, Attachment, RunPolicy
from app.runs.starter import RunStart, Unresumable
from app.runs.streams import task_stream
from app.security import Principal
from app.security.rbac import Permission, cancels_any_task, permissions_of
from app.storage.conversations import ConversationRepository
from app.storage.idempotency import KeyClaim
from app.storage.records import ConversationRecord, TaskRecord
from app.storage.runs import ConversationBusy
from app.storage.tasks import TaskRepository
from app.tools.approvals import ApprovalRules
from app.tools.errors import FieldError


async def submit_task(
    state: AppState,
    caller: Caller,
    submission: TaskSubmission,
    *,
    idempotency: KeyClaim | None = None,
    schedule_id: UUID | None = None,
) -> SubmittedTask:
    """Resolves the task's agent (and, for a conversation's turn, its history), then starts
    it. A conversation's turn runs the conversation's agent unless the task pins another
    version of it. `idempotency` is the key stored with the task; `schedule_id` tags a
    schedule's firing."""
    if submission.webhook_url is not None:
        await check_task_webhook(state, caller.tenant, submission.webhook_url)
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
        state,
        caller.tenant_id,
        submission.file_ids or [],
        given=conversation_files,
        reader=caller.subject,
    )
    return await state.runs.submit(
        caller.principal,
        submission,
        await run_policy(state, caller),
        agent,
        turn,
        attachments,
        idempotency=idempotency,
        schedule_id=schedule_id,
    )


async def load_run(state: AppState, task: TaskRecord) -> RunStart:
    """What a stored task's run starts from on an instance that did not accept it (or after a
    restart): its submitter as they were then (roles, API key), its tenant's settings now,
    its agent version (archived or not), the conversation before its turn and its files
    (those deleted since left out). `Unresumable` when one of them is gone."""
    tenant = await state.tenants.get(task.tenant_id)
    if tenant is None or not tenant.is_active:
        raise Unresumable(f"tenant {task.tenant_id} is gone or suspended")
    roles = frozenset(task.roles or ())
    key = None if task.api_key_id is None else await state.api_keys.grant(task.api_key_id)
    principal = Principal(
        subject=task.user_id,
        tenant_id=task.tenant_id,
        roles=roles,
        api_key=None if task.api_key_id is None else str(task.api_key_id),
    )
    submission = TaskSubmission.model_validate(task.request)
    async with state.database.read() as connection:
        agent = await agent_version(connection, task.tenant_id, task.agent_name, task.agent_version)
        history = await turn_history(connection, task)
    if agent is None:
        raise Unresumable(f"its agent version {task.agent_name}@{task.agent_version} is gone")
    given = [UUID(file_id) for file_id in task.file_ids or []]
    attachments = await attached_files(state, task.tenant_id, [], given=given, reader=task.user_id)
    policy = await policy_for(state, tenant, roles, permissions_of(roles), key)
    return RunStart(principal, submission, policy, agent, history, attachments)


async def turn_history(connection: AsyncConnection, task: TaskRecord) -> list[dict[str, Any]]:
    """The conversation before a task's turn; for a replay or a fork, before its recorded
    task's turn (it is no turn itself, but starts from the same history)."""
    while (source_id := task.replayed_from or task.forked_from) is not None:
        source = await TaskRepository(connection, task.tenant_id).get(source_id)
        if source is None:
            raise Unresumable(f"the task it takes its steps from ({source_id}) is gone")
        task = source
    if task.conversation_id is None or task.turn is None:
        return []
    return await history_before(connection, task.tenant_id, task.conversation_id, task.turn)


async def attached_files(
    state: AppState,
    tenant_id: str,
    file_ids: list[UUID],
    *,
    given: Sequence[UUID] = (),
    reader: str | None = None,
) -> list[Attachment]:
    """The files a request names (`file_ids`, each its tenant's and readable by `reader`,
    the run's user: 422 naming the field otherwise, as another tenant's file or another
    member's private one is as unknown as one that never existed) after those it was `given`
    before (a conversation's: any deleted, or made private, since drop out)."""
    wanted = list(dict.fromkeys([*given, *file_ids]))
    if not wanted:
        return []
    library = state.toolbox.files
    records = (
        {}
        if library is None
        else {
            record.id: record for record in await library.get_many(tenant_id, wanted, reader=reader)
        }
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
    return await policy_for(state, caller.tenant, caller.roles, caller.permissions, caller.api_key)


async def policy_for(
    state: AppState,
    tenant: Tenant,
    roles: frozenset[str],
    permissions: frozenset[Permission],
    key: KeyGrant | None,
) -> RunPolicy:
    return RunPolicy(
        roles=roles,
        enabled_tools=tenant.enabled_tools,
        sensitive_fields=frozenset(tenant.visibility.sensitive_fields),
        quotas=tenant.quotas,
        models=tenant.models,
        tools=await state.toolbox.for_tenant(tenant),
        executes_tools=Permission.TOOL_EXECUTE in permissions,
        key_quotas=None if key is None else key.quotas,
        key_scope=None if key is None else key.scope,
        approvals=None
        if tenant.record.approvals is None
        else ApprovalRules.model_validate(tenant.record.approvals),
        webhooks=await subscriptions_of(state, tenant.id),
    )


async def find_task(state: AppState, caller: Caller, task_id: UUID) -> TaskRecord:
    """The caller's task, on a short connection of its own (streams must not hold one)."""
    async with state.database.read() as connection:
        task = await TaskRepository(connection, caller.tenant_id).get(task_id)
    if task is None:
        raise NotFound("task", task_id)
    return task


async def open_stream(
    state: AppState, caller: Caller, task: TaskRecord, *, after: int, sub_agents: bool = True
) -> AsyncIterator[StreamItem]:
    """The task's stream as this caller may see it (with its sub-agents' events, unless
    `sub_agents` is False); the opening is audited first."""
    view = caller.view(state.runs.tool_sensitive_fields)
    if not view.full_access and repeats_earlier_turns(task):
        async with state.database.read() as connection:
            await learn_earlier_turns(connection, view, task)
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
        state.run_stores,
        task.id,
        task.tenant_id,
        task.chain_id,
        after=after,
        keepalive_s=state.settings.sse_keepalive_s,
        view=view,
        family=sub_agents,
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
    cancelled = await state.runs.cancel(task, f"cancelled by {caller.subject}")
    if cancelled is False:
        # It reached its end on its own before the cancel could stop it.
        ended = await find_task(state, caller, task_id)
        raise TaskAlreadyFinished(ended.id, ended.status)
    # None: its instance has not ended it yet (it stopped responding); whoever runs it next
    # ends it, and the task is answered as it is now.
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
