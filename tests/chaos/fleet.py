"""A fleet: real `omniforge serve` instances on one database of a private Postgres (and, if
asked, sharing a private Redis), the counting fake LLM they call, and a tenant with a member's
token. A scenario starts, SIGTERMs, SIGKILLs and restarts instances by name; `fleet()` stops
every process it started and removes its servers' directories, whatever happens."""

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import select

from app.security import mint_token
from app.storage import Database, upgrade_to_head
from app.storage.tables import runners
from tests.chaos.llm import ChaosLLM, Delay, instance_key
from tests.chaos.namespaces import NamespacedInstance
from tests.chaos.waiting import Changes
from tests.cluster import Instance, create_tenant, free_port
from tests.factories import fake_deployment, write_model_list
from tests.faults import PrivatePostgres, PrivateRedis, private_postgres, private_redis
from tests.service import INPUT_PRICE, JWT_SECRET, MODEL, OUTPUT_PRICE, SECRETS_KEY

# A lapsed stream connection is noticed within a few of these (see followers.READ_TIMEOUT_S).
KEEPALIVE_S = "1"
# Bounds of a start-up (imports and migrations on a busy machine) and of a drain on SIGTERM.
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 60.0
_LOG_TAIL_LINES = 60

T = TypeVar("T")


@dataclass
class Fleet:
    """Instances by name on `database_url`; `env` is what every instance gets (OMNIFORGE_*
    settings), under its own overrides. Instances' names are their keys at the fake LLM, so
    `llm.open_calls("b")` are the calls instance `b` has open."""

    database_url: str
    directory: Path
    postgres: PrivatePostgres
    redis: PrivateRedis | None
    llm: ChaosLLM
    changes: Changes
    tenant: str
    token: str
    env: dict[str, str]
    instances: dict[str, Instance] = field(default_factory=dict)

    async def start(self, name: str, *, namespaced: bool = False, **env: str) -> Instance:
        """Starts instance `name` (a new name) and returns once it accepts requests.
        `namespaced`: in a PID namespace of its own (pid 1 there), on this host's network and
        with its hostname; two such instances have the same hostname and the same pid."""
        if name in self.instances:
            raise ValueError(f"instance {name!r} exists: restart() it")
        kind = NamespacedInstance if namespaced else Instance
        settings = {**self.env, "FAKE_LLM_API_KEY": instance_key(name), **env}
        instance = kind(name, free_port(), settings)
        self.instances[name] = instance
        await _bounded(instance.start(), START_TIMEOUT_S, f"{name} to start", instance)
        return instance

    async def start_all(self, *names: str, namespaced: bool = False, **env: str) -> list[Instance]:
        """Starts instances `names` side by side (start order is `names`' order)."""
        async with asyncio.TaskGroup() as group:
            started = [
                group.create_task(self.start(name, namespaced=namespaced, **env)) for name in names
            ]
        return [task.result() for task in started]

    async def restart(self, name: str, **env: str) -> Instance:
        """Starts a stopped instance again: same name, port, kind and settings (with `env`
        over them), as a supervisor restarts a container."""
        old = self.instances[name]
        if is_live(old):
            raise ValueError(f"instance {name!r} is still running: stop it first")
        instance = type(old)(name, old.port, {**old.env, **env})
        instance.output = [*old.output, f"--- {name} restarted ---\n"]
        self.instances[name] = instance
        await _bounded(instance.start(), START_TIMEOUT_S, f"{name} to start again", instance)
        return instance

    async def kill(self, name: str) -> None:
        """SIGKILL: gone at once, its runs left for a lease to lapse."""
        await self.instances[name].kill()

    async def terminate(self, name: str) -> int:
        """SIGTERM: it drains and hands its runs over; returns its exit code."""
        instance = self.instances[name]
        return await _bounded(instance.terminate(), STOP_TIMEOUT_S, f"{name} to stop", instance)

    def live(self) -> list[Instance]:
        """The instances whose process is running, in start order."""
        return [instance for instance in self.instances.values() if is_live(instance)]

    def token_for(self, subject: str = "alice", roles: tuple[str, ...] = ("member",)) -> str:
        return mint_token(JWT_SECRET, tenant_id=self.tenant, subject=subject, roles=roles)

    async def runners(self) -> list[Any]:
        """The stored runner leases (id, hostname, pid, heartbeat_at)."""
        database = Database(self.database_url)
        try:
            async with database.read() as connection:
                return list((await connection.execute(select(runners))).all())
        finally:
            await database.dispose()

    def logs(self) -> str:
        """For a failure's report: every instance's whole log, kept as `<name>.log` in the
        fleet's directory, and its last lines."""
        parts = []
        for name, instance in self.instances.items():
            kept = self.directory / f"{name}.log"
            kept.write_text(instance.log, encoding="utf-8")
            tail = "".join(instance.output[-_LOG_TAIL_LINES:])
            parts.append(
                f"===== instance {name}: {kept}, last {_LOG_TAIL_LINES} lines =====\n{tail}"
            )
        return "\n".join(parts)


def is_live(instance: Instance) -> bool:
    return instance.process is not None and instance.process.returncode is None


async def _bounded(step: Awaitable[T], timeout_s: float, what: str, instance: Instance) -> T:
    try:
        async with asyncio.timeout(timeout_s):
            return await step
    except TimeoutError:
        raise AssertionError(
            f"timed out after {timeout_s} s waiting for {what}:\n{instance.log}"
        ) from None


def _migrate(database_url: str) -> None:
    """Migrates the database in a thread of its own, with a loop of its own: Alembic runs the
    migrations in its caller's thread (seconds of CPU on a busy machine), and the test's loop
    meanwhile serves the fake model and times other fleets' faults (a call it received late
    would seem made during an outage that began after it was sent)."""

    async def migrate() -> None:
        database = Database(database_url)
        try:
            await upgrade_to_head(database)
        finally:
            await database.dispose()

    asyncio.run(migrate())


@asynccontextmanager
async def fleet(
    directory: Path, *, llm_delay_s: Delay = 1.0, redis: bool = False, **env: str
) -> AsyncIterator[Fleet]:
    """A fleet with no instance yet: a private Postgres with a migrated database and a
    tenant, the fake LLM (replies `llm_delay_s` after their request: seconds, or a function of
    the task's marker and the call's iteration) and, with `redis`, a private Redis every
    instance uses. `env`: OMNIFORGE_* settings of every instance. `directory` (the test's
    own) gets the model list and, on a failure, the instances' whole logs.

    At the end every instance still running is killed, then the private servers are stopped
    and their directories removed; on a failure the instances' last log lines are printed."""
    changes = Changes()
    async with AsyncExitStack() as stack:
        postgres = await stack.enter_async_context(private_postgres())
        shared = await stack.enter_async_context(private_redis()) if redis else None
        llm = await stack.enter_async_context(ChaosLLM(changes, delay_s=llm_delay_s))
        database_url = await postgres.create_database("omniforge")
        await asyncio.to_thread(_migrate, database_url)
        tenant = await create_tenant(database_url)
        models = write_model_list(
            directory,
            [
                fake_deployment(
                    llm, MODEL, input_cost=INPUT_PRICE, output_cost=OUTPUT_PRICE, native_tools=True
                )
            ],
        )
        base_env = {
            "OMNIFORGE_ENV": "development",
            "OMNIFORGE_DATABASE_URL": database_url,
            "OMNIFORGE_DATA_DIR": str(directory),
            "OMNIFORGE_JWT_SECRET": JWT_SECRET,
            "OMNIFORGE_SECRETS_KEY": SECRETS_KEY,
            "OMNIFORGE_MODELS_FILE": str(models),
            "OMNIFORGE_DEFAULT_MODEL": MODEL,
            "OMNIFORGE_LLM_MAX_ATTEMPTS": "1",
            "OMNIFORGE_SSE_KEEPALIVE_S": KEEPALIVE_S,
            **({"OMNIFORGE_REDIS_URL": shared.url} if shared is not None else {}),
            **env,
        }
        token = mint_token(JWT_SECRET, tenant_id=tenant, subject="alice", roles=("member",))
        group = Fleet(
            database_url, directory, postgres, shared, llm, changes, tenant, token, base_env
        )
        try:
            yield group
        except BaseException:
            print(group.logs(), file=sys.stdout)
            raise
        finally:
            for instance in group.instances.values():
                await instance.kill()
