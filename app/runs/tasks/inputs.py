"""What a task's run is given besides its submission: the policy of its caller and tenant,
its files, the conversation before it; and, for a task stored on another instance (or before
a restart), all of that rebuilt from the stored task."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.governance.api_keys import ApiKeys, KeyGrant
from app.governance.callers import Caller
from app.governance.tenants import Tenant, TenantDirectory
from app.resources.toolbox import Toolbox
from app.resources.webhooks import Webhooks
from app.resources.webhooks.subscriptions import NONE
from app.runs.agents import agent_version
from app.runs.conversations import history_before
from app.runs.errors import InvalidSubmission
from app.runs.models import MAX_CONVERSATION_FILES, Attachment, RunPolicy, TaskSubmission
from app.runs.starter import RunStart, Unresumable
from app.security import Principal
from app.security.rbac import Permission, permissions_of
from app.storage.database import Database
from app.storage.records import TaskRecord
from app.storage.tasks import TaskRepository
from app.tools.approvals import ApprovalRules
from app.tools.errors import FieldError


@dataclass(frozen=True, slots=True)
class RunInputs:
    """Builds what runs start from, out of the tenant directory, API keys, the toolbox (the
    tenant's tools and files) and the webhooks' subscriptions (None: a process without)."""

    database: Database
    tenants: TenantDirectory
    api_keys: ApiKeys
    toolbox: Toolbox
    webhooks: Webhooks | None = None

    async def load(self, task: TaskRecord) -> RunStart:
        """What a stored task's run starts from on an instance that did not accept it (or
        after a restart): its submitter as they were then (roles, API key), its tenant's
        settings now, its agent version (archived or not), the conversation before its turn
        and its files (those deleted since left out). `Unresumable` when one of them is
        gone."""
        tenant = await self.tenants.get(task.tenant_id)
        if tenant is None or not tenant.is_active:
            raise Unresumable(f"tenant {task.tenant_id} is gone or suspended")
        roles = frozenset(task.roles or ())
        key = None if task.api_key_id is None else await self.api_keys.grant(task.api_key_id)
        principal = Principal(
            subject=task.user_id,
            tenant_id=task.tenant_id,
            roles=roles,
            api_key=None if task.api_key_id is None else str(task.api_key_id),
        )
        submission = TaskSubmission.model_validate(task.request)
        async with self.database.read() as connection:
            agent = await agent_version(
                connection, task.tenant_id, task.agent_name, task.agent_version
            )
            history = await turn_history(connection, task)
        if agent is None:
            raise Unresumable(f"its agent version {task.agent_name}@{task.agent_version} is gone")
        given = [UUID(file_id) for file_id in task.file_ids or []]
        attachments = await self.files(task.tenant_id, [], given=given, reader=task.user_id)
        policy = await self.policy(tenant, roles, permissions_of(roles), key)
        return RunStart(principal, submission, policy, agent, history, attachments)

    async def caller_policy(self, caller: Caller) -> RunPolicy:
        """What a run `caller` starts now may do."""
        return await self.policy(caller.tenant, caller.roles, caller.permissions, caller.api_key)

    async def policy(
        self,
        tenant: Tenant,
        roles: frozenset[str],
        permissions: frozenset[Permission],
        key: KeyGrant | None,
    ) -> RunPolicy:
        """What a run of `tenant`, started by a caller with these roles and API key, may do."""
        return RunPolicy(
            roles=roles,
            enabled_tools=tenant.enabled_tools,
            sensitive_fields=frozenset(tenant.visibility.sensitive_fields),
            quotas=tenant.quotas,
            models=tenant.models,
            tools=await self.toolbox.for_tenant(tenant),
            executes_tools=Permission.TOOL_EXECUTE in permissions,
            key_quotas=None if key is None else key.quotas,
            key_scope=None if key is None else key.scope,
            approvals=None
            if tenant.record.approvals is None
            else ApprovalRules.model_validate(tenant.record.approvals),
            webhooks=NONE
            if self.webhooks is None
            else await self.webhooks.subscriptions.of(tenant.id),
        )

    async def files(
        self,
        tenant_id: str,
        file_ids: list[UUID],
        *,
        given: Sequence[UUID] = (),
        reader: str | None = None,
    ) -> list[Attachment]:
        """The files a request names (`file_ids`, each its tenant's and readable by
        `reader`, the run's user: `InvalidSubmission` naming the field otherwise, as another
        tenant's file or another member's private one is as unknown as one that never
        existed) after those it was `given` before (a conversation's: any deleted, or made
        private, since drop out)."""
        wanted = list(dict.fromkeys([*given, *file_ids]))
        if not wanted:
            return []
        library = self.toolbox.files
        records = (
            {}
            if library is None
            else {
                record.id: record
                for record in await library.get_many(tenant_id, wanted, reader=reader)
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
                    f"{len(found)} files in all with those given before; a conversation's "
                    f"turns may read at most {MAX_CONVERSATION_FILES}",
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
