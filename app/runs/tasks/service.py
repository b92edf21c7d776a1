"""Tasks on behalf of a caller, each within the caller's tenant: submitted (once per
idempotency key), read, cancelled and followed. What every way in shares: the REST routes,
A2A, the OpenAI-compatible endpoint and schedules' firings."""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID

from app.chain import TaskState
from app.chain.models import utc_now
from app.governance.audit import AuditAction
from app.governance.auditing import chain_read
from app.governance.callers import Caller
from app.resources.conversations.store import ConversationRepository
from app.resources.webhooks.urls import refusal
from app.runs.admission import Turn
from app.runs.agents import ResolvedAgent, builtin_agent, parse_ref, resolve_agent
from app.runs.channel import StreamItem
from app.runs.earlier_turns import learn_earlier_turns, repeats_earlier_turns
from app.runs.errors import Forbidden, InvalidSubmission, NotFound, TaskAlreadyFinished
from app.runs.manager import RunManager, SubmittedTask
from app.runs.models import TaskSubmission
from app.runs.streams import task_stream
from app.runs.tasks.idempotency import IdempotencyKeyReused, fingerprint
from app.runs.tasks.inputs import RunInputs
from app.security.rbac import Permission, cancels_any_task
from app.security.visibility import ReaderView
from app.storage.database import Database
from app.storage.idempotency import IdempotencyKeys, KeyClaim, KeyTaken
from app.storage.pagination import Cursor, Page
from app.storage.records import ConversationRecord, TaskRecord
from app.storage.runs import ConversationBusy, RunStores
from app.storage.tasks import TaskFilter, TaskRepository
from app.tools.errors import FieldError

# A duplicate that lost the race reads the winner's key after it committed; should that key
# expire in between, the submission is simply tried again.
_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class TaskService:
    """Tasks through the run manager (`runs`), their runs' inputs built by `inputs`, their
    streams read from `stores` with a keep-alive every `keepalive_s`; an idempotency key
    lasts `idempotency_ttl_s`."""

    database: Database
    runs: RunManager
    stores: RunStores
    inputs: RunInputs
    keepalive_s: float = 15.0
    idempotency_ttl_s: float = 86_400.0

    async def submit(
        self,
        caller: Caller,
        submission: TaskSubmission,
        *,
        idempotency: KeyClaim | None = None,
        schedule_id: UUID | None = None,
    ) -> SubmittedTask:
        """Resolves the task's agent (and, for a conversation's turn, its history), then
        starts it. A conversation's turn runs the conversation's agent unless the task pins
        another version of it. `idempotency` is the key stored with the task; `schedule_id`
        tags a schedule's firing."""
        if submission.webhook_url is not None:
            network = self.inputs.toolbox.network_of(caller.tenant)
            why = await refusal(submission.webhook_url, network)
            if why is not None:
                raise InvalidSubmission([FieldError("webhook_url", why)])
        turn: Turn | None = None
        conversation_files: list[UUID] = []
        # The default agent's plain tasks (the most frequent) need no connection here.
        agent = builtin_agent(submission.agent) if submission.conversation_id is None else None
        if agent is None:
            agent, turn, conversation_files = await self._resolve(caller, submission)
        attachments = await self.inputs.files(
            caller.tenant_id,
            submission.file_ids or [],
            given=conversation_files,
            reader=caller.subject,
        )
        return await self.runs.submit(
            caller.principal,
            submission,
            await self.inputs.caller_policy(caller),
            agent,
            turn,
            attachments,
            idempotency=idempotency,
            schedule_id=schedule_id,
        )

    async def _resolve(
        self, caller: Caller, submission: TaskSubmission
    ) -> tuple[ResolvedAgent, Turn | None, list[UUID]]:
        """The task's agent, and for a conversation's turn the turn and its conversation's
        files, read in one connection."""
        turn: Turn | None = None
        ref = submission.agent
        conversation_files: list[UUID] = []
        async with self.database.read() as connection:
            if submission.conversation_id is not None:
                conversation = await ConversationRepository(connection, caller.tenant_id).get(
                    submission.conversation_id
                )
                if conversation is None:
                    raise NotFound("conversation", submission.conversation_id)
                if conversation.user_id != caller.subject and not cancels_any_task(caller.roles):
                    raise Forbidden(
                        "members add turns only to their own conversations; this one is "
                        "another user's",
                        permission=Permission.TASK_CREATE,
                    )
                ref = _turn_agent(conversation, ref)
                history = await self.runs.histories.history(
                    connection, caller.tenant_id, conversation.id, conversation.turns
                )
                if history.running is not None:
                    raise ConversationBusy(
                        conversation.id, history.running, f"turn task {history.running} is running"
                    )
                turn = Turn(conversation.id, history.turns, history.messages)
                conversation_files = conversation.file_ids
            agent = await resolve_agent(connection, caller.tenant_id, ref)
        return agent, turn, conversation_files

    async def submit_once(
        self, caller: Caller, submission: TaskSubmission, key: str
    ) -> tuple[SubmittedTask, bool]:
        """The task of this idempotency key: the one a first submission with it made (True: a
        repeat), or a new one stored with the key in its own transaction (False). A
        concurrent duplicate waits for the first to be stored and then answers with its
        task. A repeat whose body says something else is refused (`IdempotencyKeyReused`)."""
        digest = fingerprint(submission)
        for _ in range(_ATTEMPTS):
            earlier = await self._earlier(caller, key, digest)
            if earlier is not None:
                return earlier, True
            now = utc_now()
            ttl = timedelta(seconds=self.idempotency_ttl_s)
            claim = KeyClaim(caller.subject, key, digest, now, now + ttl)
            try:
                return await self.submit(caller, submission, idempotency=claim), False
            except KeyTaken:
                continue
        raise RuntimeError(f"idempotency key {key!r} was neither found nor claimable")

    async def _earlier(self, caller: Caller, key: str, digest: str) -> SubmittedTask | None:
        async with self.database.read() as connection:
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
            raise IdempotencyKeyReused(task.id, found.expires_at)
        return SubmittedTask(task.id, task.chain_id, task.status)

    async def find(self, caller: Caller, task_id: UUID) -> TaskRecord:
        """The caller's task, on a short connection of its own (streams must not hold one)."""
        async with self.database.read() as connection:
            task = await TaskRepository(connection, caller.tenant_id).get(task_id)
        if task is None:
            raise NotFound("task", task_id)
        return task

    async def page(
        self,
        caller: Caller,
        *,
        status: TaskState | None = None,
        agent: str | None = None,
        schedule_id: UUID | None = None,
        cursor: Cursor | None = None,
        limit: int = 50,
    ) -> Page[TaskRecord]:
        """The caller's tenant's tasks, newest first: of one status, agent (any version) or
        schedule when given."""
        async with self.database.read() as connection:
            return await TaskRepository(connection, caller.tenant_id).page(
                status=status, agent=agent, schedule_id=schedule_id, cursor=cursor, limit=limit
            )

    async def counted_page(
        self, caller: Caller, wanted: TaskFilter, *, cursor: Cursor | None, limit: int
    ) -> tuple[Page[TaskRecord], int]:
        """A page of the caller's tenant's tasks `wanted` names, newest first, and how many
        there are in all."""
        async with self.database.read() as connection:
            tasks = TaskRepository(connection, caller.tenant_id)
            return await tasks.counted_page(wanted, cursor=cursor, limit=limit)

    async def cancel(self, caller: Caller, task_id: UUID) -> TaskRecord:
        """Stops the run and returns the task once its end is stored. Members cancel their
        own tasks; tenant admins any task of the tenant."""
        task = await self.find(caller, task_id)
        if task.user_id != caller.subject and not cancels_any_task(caller.roles):
            raise Forbidden(
                "members cancel only their own tasks; this one is another user's",
                permission=Permission.TASK_CANCEL,
            )
        if task.is_finished:
            raise TaskAlreadyFinished(task.id, task.status)
        cancelled = await self.runs.cancel(task, f"cancelled by {caller.subject}")
        if cancelled is False:
            # It reached its end on its own before the cancel could stop it.
            ended = await self.find(caller, task_id)
            raise TaskAlreadyFinished(ended.id, ended.status)
        # None: its instance has not ended it yet (it stopped responding); whoever runs it
        # next ends it, and the task is answered as it is now.
        return await self.find(caller, task_id)

    async def follow(
        self, caller: Caller, task_id: UUID, *, after: int, sub_agents: bool = True
    ) -> AsyncIterator[StreamItem] | None:
        """The caller's task's stream after event `after`, as `stream`; None when the task
        has finished and has nothing after `after`. A run live in this process is followed
        without reading its task from the store (the common case: a client following the
        task it has just submitted)."""
        live = self.runs.followed(task_id, caller.tenant_id)
        if live is not None:
            chain_id = live.recorder.chain.id
            return self._stream(caller, task_id, chain_id, after=after, sub_agents=sub_agents)
        task = await self.find(caller, task_id)
        if task.is_finished and after >= task.last_seq:
            return None
        return await self.stream(caller, task, after=after, sub_agents=sub_agents)

    async def stream(
        self, caller: Caller, task: TaskRecord, *, after: int, sub_agents: bool = True
    ) -> AsyncIterator[StreamItem]:
        """The task's stream as this caller may see it (with its sub-agents' events, unless
        `sub_agents` is False); the opening is audited first."""
        view = caller.view(self.runs.tool_sensitive_fields)
        if not view.full_access and repeats_earlier_turns(task):
            async with self.database.read() as connection:
                await learn_earlier_turns(connection, view, task)
        return self._stream(
            caller, task.id, task.chain_id, after=after, sub_agents=sub_agents, view=view
        )

    def _stream(
        self,
        caller: Caller,
        task_id: UUID,
        chain_id: UUID,
        *,
        after: int,
        sub_agents: bool,
        view: ReaderView | None = None,
    ) -> AsyncIterator[StreamItem]:
        if view is None:
            view = caller.view(self.runs.tool_sensitive_fields)
        row = chain_read(
            caller,
            action=AuditAction.CHAIN_STREAM,
            chain_id=chain_id,
            task_id=task_id,
            view=view,
            after=after,
        )
        # Streams open often and must start at once: the row is stored with the next write.
        self.runs.queue_audit([row])
        return task_stream(
            self.runs,
            self.stores,
            task_id,
            caller.tenant_id,
            chain_id,
            after=after,
            keepalive_s=self.keepalive_s,
            view=view,
            family=sub_agents,
        )


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
