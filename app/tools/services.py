"""What tools reach beyond their arguments, bound to one run's tenant and task: its secrets,
files, todo list and network policy (`NetworkPolicy`, defined beside the guard it feeds). The
service implements these; a library use without a service (tests, the bare runtime) gives a
tool none of them, and the tool then fails with a clear message instead of reaching anything
unscoped."""

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from app.chain import ErrorCode
from app.sandbox import Execution
from app.sandbox.bubblewrap import OnOutput
from app.tools.errors import ToolError
from app.tools.header_values import PROBLEM, sendable
from app.tools.net.policy import NetworkPolicy as NetworkPolicy

if TYPE_CHECKING:
    from app.tools.models import ChildRun, ToolCallContext

MASK = "[secret]"
# Secrets shorter than this are not masked inside other text (they would mask every "a").
MIN_MASKED_CHARS = 4


SecretSender = Literal["tool", "mcp_server", "remote_agent"]


@dataclass(frozen=True, slots=True)
class SecretUse:
    """Who uses a secret: what sends it (a tool such as `http_request`, an MCP server or a
    remote agent, by name) and, within a run, for which task, agent, member and roles. A use
    outside a run (a session opened, a card fetched) names the sender alone."""

    sender: SecretSender
    name: str
    task_id: str | None = None
    agent: str | None = None
    user: str | None = None
    roles: frozenset[str] | None = None

    @classmethod
    def in_call(cls, context: "ToolCallContext", sender: SecretSender, name: str) -> "SecretUse":
        """The use a tool call makes: its run's task, agent (`name@version`), member, roles."""
        return cls(
            sender,
            name,
            task_id=context.task_id,
            agent=context.agent_id,
            user=context.user_id,
            roles=context.roles,
        )


class SecretResolver(Protocol):
    """The run's tenant's secrets by name. `resolve` raises `ToolError` with
    `secret_not_found` for a name the tenant has not set and `secret_out_of_scope` for a use
    its `usable_by` does not allow (`use` None: a use by nobody in particular, which only an
    unscoped secret allows); `authorize` checks uses of secrets sent by another means (an
    MCP server's session) the same way; `mask` replaces in a text every form of every value
    a tool of this run may come to hold (any case, escaped, encoded) by `MASK`."""

    async def resolve(self, name: str, use: SecretUse | None = None) -> str: ...

    async def authorize(self, names: Iterable[str], use: SecretUse) -> None: ...

    def mask(self, text: str) -> str: ...


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A tenant's stored file, without its content."""

    id: str
    name: str
    media_type: str
    size_bytes: int
    created_at: datetime
    pages: int | None = None  # PDF
    width: int | None = None  # images
    height: int | None = None
    # Uploaded by someone other than the run's user: what it says is untrusted.
    theirs: bool = False


@dataclass(frozen=True, slots=True)
class FileMatch:
    """A search hit: the file, its rank (higher is better) and a snippet around the match."""

    file: FileInfo
    rank: float
    snippet: str


class FileAccess(Protocol):
    """The run's tenant's files that its user may read (the tenant's shared ones, its own
    private ones). Unknown ids (another tenant's, another member's private file included)
    raise `ToolError` with `not_found`; `attached` lists the files given to the task or its
    conversation."""

    async def list_files(self, *, limit: int) -> list[FileInfo]: ...

    def attached(self) -> Sequence[str]: ...

    async def info(self, file_id: str) -> FileInfo: ...

    async def content(self, file_id: str) -> bytes: ...

    async def text(self, file_id: str) -> str | None:
        """The file's extracted text (text files, PDFs), None for other kinds."""
        ...

    async def search(self, query: str, *, limit: int) -> list[FileMatch]: ...


@dataclass(frozen=True, slots=True)
class Todo:
    id: int
    text: str
    done: bool
    created_at: datetime


class TodoList(Protocol):
    """The run's task's todo list, stored so that it outlives the process."""

    async def add(self, text: str) -> Todo: ...

    async def items(self) -> list[Todo]: ...

    async def complete(self, todo_id: int) -> Todo: ...

    async def delete(self, todo_id: int) -> None: ...


class Trail(Protocol):
    """The chain of its own in which a call records what another agent's task does (a
    remote agent's): each `note` a step as it comes, the `answer` its last. Left without an
    answer, it ends as the call does (failed with the call's error, or cancelled)."""

    @property
    def child(self) -> "ChildRun":
        """Its task and chain, for the call's result to name (its usage is the call's)."""

    def note(self, text: str) -> None: ...

    def answer(self, text: str) -> None: ...


class Trails(Protocol):
    """Opens a call's `Trail`: a task and chain under the call, linked to it as a sub-agent's
    are, stored and streamed (in its ancestors' streams too) like any run's."""

    def open(
        self, context: "ToolCallContext", agent: str, message: str
    ) -> AbstractAsyncContextManager[Trail]: ...


class WorkspaceAccess(Protocol):
    """The run's sandboxed workspace (its conversation's, else its task's): its sandbox
    started, or restored from its last snapshot, on first use. A limit that stops a call is
    in its `Execution` (`stopped_by`); a sandbox that cannot run raises `SandboxFailed`."""

    async def python(self, code: str, *, on_output: OnOutput | None = None) -> Execution: ...

    async def run(
        self,
        argv: list[str] | None,
        *,
        script: str | None = None,
        stdin: str | None = None,
        on_output: OnOutput | None = None,
    ) -> Execution: ...

    async def files(self) -> list[dict[str, Any]]: ...

    async def read(self, path: str, max_bytes: int) -> bytes | None: ...

    async def write(self, path: str, data: bytes) -> None: ...


@dataclass(frozen=True, slots=True)
class ToolServices:
    """One run's services for its tools; each None where the process offers none."""

    secrets: SecretResolver | None = None
    files: FileAccess | None = None
    todos: TodoList | None = None
    workspace: WorkspaceAccess | None = None
    network: NetworkPolicy = field(default_factory=NetworkPolicy)
    # Where calls that run a remote agent's task record it (None: as progress reports).
    trails: Trails | None = None

    def redact(self, text: str) -> str:
        """`text` with every secret value this run may hold masked."""
        return text if self.secrets is None else self.secrets.mask(text)


NO_SERVICES = ToolServices()

T = TypeVar("T")


def require(service: T | None, what: str) -> T:
    """A service a tool cannot work without; a clear failure where the process has none."""
    if service is None:
        raise ToolError(f"{what} are not available here (no service behind this run)")
    return service


SecretLookup = Callable[[str], Awaitable[str]]


async def resolve_headers(
    headers: Mapping[str, Any], lookup: SecretLookup | None, *, check: bool = True
) -> dict[str, str]:
    """Headers as they are sent: text as is, each `{"secret": NAME, "prefix": TEXT}` (prefix
    optional) as the prefix followed by the tenant's secret NAME, found by `lookup`
    (`secret_not_found` for a name the tenant has not set, `secret_out_of_scope` for one the
    use may not have). With `check`, a value a header cannot carry fails with
    `invalid_arguments`, by a message that shows no character of it."""
    resolved: dict[str, str] = {}
    for name, value in headers.items():
        if isinstance(value, Mapping):
            find = require(lookup, "secrets")
            secret = str(value["secret"])
            resolved[name] = str(value.get("prefix", "")) + await find(secret)
            source = f"the value of the secret {secret!r} after its prefix"
        else:
            resolved[name] = str(value)
            source = "its value"
        if check and not sendable(resolved[name]):
            raise ToolError(
                f"the header {name!r} cannot be sent: {source} {PROBLEM}",
                error_code=ErrorCode.INVALID_ARGUMENTS,
            )
    return resolved


def not_found(what: str) -> ToolError:
    return ToolError(what, error_code=ErrorCode.NOT_FOUND)
