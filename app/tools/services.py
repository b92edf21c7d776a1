"""What tools reach beyond their arguments, bound to one run's tenant and task: its secrets,
files, todo list and network policy. The service implements these; a library use without a
service (tests, the bare runtime) gives a tool none of them, and the tool then fails with a
clear message instead of reaching anything unscoped."""

import ipaddress
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from app.chain import ErrorCode
from app.tools.errors import ToolError

if TYPE_CHECKING:
    from app.tools.models import ChildRun, ToolCallContext

MASK = "[secret]"
# Secrets shorter than this are not masked inside other text (they would mask every "a").
MIN_MASKED_CHARS = 4


class SecretResolver(Protocol):
    """The run's tenant's secrets by name. `resolve` raises `ToolError` with
    `secret_not_found` for a name the tenant has not set; `mask` replaces in a text every
    value a tool of this run may come to hold (plain and as JSON escapes it) by `MASK`."""

    async def resolve(self, name: str) -> str: ...

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


@dataclass(frozen=True, slots=True)
class FileMatch:
    """A search hit: the file, its rank (higher is better) and a snippet around the match."""

    file: FileInfo
    rank: float
    snippet: str


class FileAccess(Protocol):
    """The run's tenant's files. Unknown ids (another tenant's included) raise `ToolError`
    with `not_found`; `attached` lists the files given to the task or its conversation."""

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


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class NetworkPolicy:
    """Where a run's HTTP tools may go beyond the public internet. `hosts` are exact names
    (lower case) or `*.suffix` wildcards; `networks` are CIDRs. Both come from the tenant's
    settings and the operator's: an entry here lets a private or loopback address through the
    SSRF guard, and `http_request` reaches only hosts listed here (or public ones the tenant
    listed by name)."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()

    @classmethod
    def of(cls, entries: Iterable[str]) -> "NetworkPolicy":
        """From settings' entries: each a CIDR or bare address, else a host name."""
        hosts: set[str] = set()
        networks: list[Network] = []
        for entry in entries:
            entry = entry.strip()
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry.lower().rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def merged(self, other: "NetworkPolicy") -> "NetworkPolicy":
        return NetworkPolicy(self.hosts | other.hosts, self.networks + other.networks)

    def allows_host(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        if host in self.hosts:
            return True
        return any(
            pattern.startswith("*.") and host.endswith(pattern[1:]) for pattern in self.hosts
        )

    def allows_address(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        return any(address in network for network in self.networks)


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


@dataclass(frozen=True, slots=True)
class ToolServices:
    """One run's services for its tools; each None where the process offers none."""

    secrets: SecretResolver | None = None
    files: FileAccess | None = None
    todos: TodoList | None = None
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
    headers: Mapping[str, Any], lookup: SecretLookup | None
) -> dict[str, str]:
    """Headers as they are sent: text as is, each `{"secret": NAME, "prefix": TEXT}` (prefix
    optional) as the prefix followed by the tenant's secret NAME, found by `lookup`
    (`secret_not_found` for a name the tenant has not set)."""
    resolved: dict[str, str] = {}
    for name, value in headers.items():
        if isinstance(value, Mapping):
            find = require(lookup, "secrets")
            resolved[name] = str(value.get("prefix", "")) + await find(str(value["secret"]))
        else:
            resolved[name] = str(value)
    return resolved


def not_found(what: str) -> ToolError:
    return ToolError(what, error_code=ErrorCode.NOT_FOUND)
