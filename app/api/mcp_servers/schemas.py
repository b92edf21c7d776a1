"""MCP servers as clients register them and see them."""

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from app.api.outbound import (
    MAX_HEADERS,
    NAME_PATTERN,
    HeaderValue,
    SecretRef,
    checked_url,
    header_document,
    headers_checker,
)
from app.resources.mcp_servers import McpServerRecord, notes, offered

MAX_LISTED_TOOLS = 512


ServerName = Annotated[
    str,
    Field(
        pattern=NAME_PATTERN,
        description="Lower-case letters, digits and `-`, up to 31: its tools are named "
        "`<name>__<tool>`.",
    ),
]
ServerUrl = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=2048),
    AfterValidator(checked_url),
    Field(description="The server's streamable-HTTP endpoint, e.g. `https://mcp.example/mcp`."),
]
RemoteToolName = Annotated[str, StringConstraints(min_length=1, max_length=128)]
RoleName = Annotated[str, StringConstraints(min_length=1, max_length=64)]


Headers = Annotated[
    dict[str, HeaderValue | SecretRef],
    Field(
        max_length=MAX_HEADERS,
        description='Sent with every request to the server: text, or `{"secret": NAME}` '
        "for a tenant secret (never shown; resolved when a session opens), optionally after "
        'a `prefix`: `{"secret": "GH_TOKEN", "prefix": "Bearer "}`.',
    ),
    AfterValidator(
        headers_checker(
            {"mcp-session-id", "mcp-protocol-version", "last-event-id"}, set_by="the MCP transport"
        )
    ),
]
AllowedTools = Annotated[
    list[RemoteToolName] | None,
    Field(
        max_length=MAX_LISTED_TOOLS,
        description="The server's tools (by its names for them) its runs may use; null: all.",
    ),
]
ToolRoles = Annotated[
    dict[RemoteToolName, Annotated[list[RoleName], Field(min_length=1, max_length=32)]],
    Field(
        max_length=MAX_LISTED_TOOLS,
        description="Per tool (the server's name for it): roles, any one of which a caller "
        "needs to use it.",
    ),
]


class McpServerCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "github",
                    "url": "https://mcp.example.com/mcp",
                    "headers": {
                        "Authorization": {"secret": "GITHUB_MCP_TOKEN", "prefix": "Bearer "}
                    },
                    "allowed_tools": ["search_issues", "get_issue"],
                    "tool_roles": {"get_issue": ["tenant_admin"]},
                }
            ]
        },
    )

    name: ServerName
    url: ServerUrl
    headers: Headers = Field(default_factory=dict)
    allowed_tools: AllowedTools = None
    tool_roles: ToolRoles = Field(default_factory=dict)


class McpServerUpdate(BaseModel):
    """The fields to change; `allowed_tools: null` offers all the server's tools again."""

    model_config = ConfigDict(extra="forbid")

    name: ServerName | None = None
    url: ServerUrl | None = None
    headers: Headers | None = None
    allowed_tools: AllowedTools = None
    tool_roles: ToolRoles | None = None

    def changes(self) -> dict[str, Any]:
        """The columns to set: the fields given (`allowed_tools` may be given as null)."""
        changes: dict[str, Any] = {}
        for name in self.model_fields_set:
            value = getattr(self, name)
            if name == "headers" and value is not None:
                value = header_document(value)
            if value is None and name != "allowed_tools":
                continue
            changes[name] = value
        return changes


class McpToolOut(BaseModel):
    name: str = Field(description="The tool's name for runs: `<server>__<tool>`.")
    tool: str = Field(description="The server's name for it.")
    description: str
    parameters: dict[str, Any] = Field(description="Its arguments' JSON Schema.")
    required_roles: list[str]
    allowed: bool = Field(description="Whether `allowed_tools` lets runs use it.")


class SkippedToolOut(BaseModel):
    tool: str = Field(description="The server's name for it.")
    reason: str


class McpServerOut(BaseModel):
    id: UUID
    name: str
    url: str
    headers: dict[str, Any] = Field(
        description='As registered: text, or `{"secret": NAME}` (a value is never shown).'
    )
    allowed_tools: list[str] | None
    tool_roles: dict[str, list[str]]
    status: Literal["ok", "error", "unknown"] = Field(
        description="`ok`: it answered when last asked (discovery or a call); `error`: it did "
        "not (`status_detail` says why); `unknown`: not asked yet."
    )
    status_detail: str | None = Field(
        description="Why it is in `error`; with `ok`, the tools its discovery skipped and why."
    )
    checked_at: datetime | None = Field(description="When its status was last established.")
    tools: list[McpToolOut] = Field(description="What it offered when last asked.")
    skipped_tools: list[SkippedToolOut] = Field(
        description="Tools it listed that cannot be offered (an invalid schema, a name "
        "another tool of it also becomes)."
    )
    created_by: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, record: McpServerRecord) -> "McpServerOut":
        allowed = record.allowed_tools
        named_tools, skipped = offered(record)
        tools = [
            McpToolOut(
                name=name,
                tool=spec.remote,
                description=spec.description,
                parameters=spec.parameters,
                required_roles=record.tool_roles.get(spec.remote, []),
                allowed=allowed is None or spec.remote in allowed,
            )
            for name, spec in named_tools
        ]
        return cls.model_validate(
            {
                **record.model_dump(exclude={"tools"}),
                # With `ok`, as the current name and allowed_tools read what it offered.
                "status_detail": notes(record) if record.status == "ok" else record.status_detail,
                "tools": tools,
                "skipped_tools": [SkippedToolOut(tool=t, reason=reason) for t, reason in skipped],
            }
        )


class McpServerList(BaseModel):
    items: list[McpServerOut]
