"""What tools may reach and spend: the network past the SSRF guard, fetched and uploaded
bytes, the processes that read documents, tools loaded from modules, MCP calls."""

from pathlib import Path

from pydantic import Field, field_validator

from app.config.values import CommaList, Section, comma_separated


class ToolSettings(Section):
    """Tools' reach, files, documents and plugins."""

    network_allow: CommaList = Field(
        default_factory=list,
        description="For every tenant: hosts (`api.internal`, `*.corp.example`) `http_request` "
        "may call, and CIDRs or addresses (`10.1.0.0/16`) that web and HTTP tools, MCP "
        "servers, remote agents and webhooks may reach although the SSRF guard refuses "
        "private, loopback and link-local addresses. A host name alone never opens a private "
        "address (list its network too); an address with a port (`127.0.0.1:8000`) opens that "
        "port alone, and is the only entry that opens the service's own listening port; cloud "
        "metadata endpoints stay refused.",
    )
    fetch_max_bytes: int = Field(
        default=5 * 1024 * 1024,
        ge=1024,
        description="web_fetch and http_request read at most this much of a response body.",
    )
    fetch_timeout_s: float = Field(
        default=20.0, gt=0, description="Whole web_fetch or http_request call, redirects included."
    )
    fetch_user_agent: str = Field(
        default="OmniForge/0.1 (+https://github.com/omniforge; web_fetch)",
        min_length=1,
        max_length=256,
        description="User-Agent of web_fetch and http_request.",
    )
    file_max_bytes: int = Field(
        default=20 * 1024 * 1024,
        ge=1024,
        description="Largest file an upload may store; larger ones are refused with 413.",
    )
    files_dir: Path | None = Field(
        default=None,
        description="Directory that holds uploaded files' bytes; unset: the database holds them.",
    )
    document_cpu_s: int = Field(
        default=10,
        ge=1,
        le=3600,
        description="CPU seconds reading one document (a PDF's text) may take, in a process of "
        "its own; past them an upload is refused (422 `document-refused`) and `web_fetch` fails.",
    )
    document_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Wall-clock seconds reading one document may take (its process is then "
        "killed); refused like `document_cpu_s`.",
    )
    document_memory_mb: int = Field(
        default=1024,
        ge=128,
        description="Address space of a document-reading process (MiB); a document needing more "
        "is refused (413 `document-too-large`).",
    )
    document_max_pages: int = Field(
        default=2_000,
        ge=1,
        description="Pages a document may have to be read; more: 413 `document-too-large`.",
    )
    tenant_work_slots: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Documents one tenant may have read at once (of the `document_workers` "
        "processes); its others wait their turn, other tenants' do not wait for them.",
    )
    document_workers: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Document-reading processes kept warm; more documents wait for one.",
    )
    tool_modules: CommaList = Field(
        default_factory=list,
        description="Python modules whose BaseTool subclasses are loaded as tools besides the "
        "`omniforge.tools` entry points (comma-separated).",
    )
    mcp_timeout_s: float = Field(
        default=30.0, gt=0, description="One call to an MCP server's tool, or its discovery."
    )

    @field_validator("network_allow", "tool_modules", mode="before")
    @classmethod
    def _lists_split(cls, value: object) -> object:
        return comma_separated(value)
