"""Remote A2A agents as clients register them and see them."""

from datetime import datetime
from typing import Annotated, Any
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
from app.resources.remote_agents import RemoteAgentRecord
from app.tools.a2a.cards import card_of
from app.tools.a2a.remote import skills_of

AgentName = Annotated[
    str,
    Field(
        pattern=NAME_PATTERN,
        description="Lower-case letters, digits and `-`, up to 31: its skills become the "
        "tools `<name>__<skill>`. Unique among the tenant's remote agents and MCP servers.",
    ),
]
CardUrl = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=2048),
    AfterValidator(checked_url),
    Field(
        description="The agent card's URL, e.g. "
        "`https://agent.example/.well-known/agent-card.json`; an agent's bare address "
        "(`https://agent.example`) means its well-known card."
    ),
]


Headers = Annotated[
    dict[str, HeaderValue | SecretRef],
    Field(
        max_length=MAX_HEADERS,
        description="Sent with every request to the agent (its card's fetch included): text, "
        'or `{"secret": NAME}` for a tenant secret (never shown; resolved at each call), '
        'optionally after a `prefix`: `{"secret": "AGENT_TOKEN", "prefix": "Bearer "}`.',
    ),
    AfterValidator(
        headers_checker({"a2a-version", "a2a-extensions", "user-agent"}, set_by="the A2A client")
    ),
]


class RemoteAgentCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "travel",
                    "card_url": "https://travel.example.com/.well-known/agent-card.json",
                    "headers": {"Authorization": {"secret": "TRAVEL_TOKEN", "prefix": "Bearer "}},
                }
            ]
        },
    )

    name: AgentName
    card_url: CardUrl
    headers: Headers = Field(default_factory=dict)
    enabled: bool = Field(default=True, description="Whether its skills are offered to runs.")


class RemoteAgentUpdate(BaseModel):
    """The fields to change; `refresh: true` fetches its card again (so does a change of
    `headers`), and its skills become what the card lists now."""

    model_config = ConfigDict(extra="forbid")

    name: AgentName | None = None
    headers: Headers | None = None
    enabled: bool | None = None
    refresh: bool = Field(default=False, description="Fetch its agent card again.")

    def changes(self) -> dict[str, Any]:
        """The columns to set: the fields given (`refresh` is not one)."""
        changes: dict[str, Any] = {}
        for name in self.model_fields_set - {"refresh"}:
            value = getattr(self, name)
            if value is None:
                continue
            changes[name] = header_document(value) if name == "headers" else value
        return changes

    @property
    def refetches(self) -> bool:
        return self.refresh or self.headers is not None


class RemoteSkillOut(BaseModel):
    name: str = Field(description="The tool's name for runs: `<agent>__<skill id>`.")
    skill: str = Field(description="The skill's id on the agent's card.")
    title: str = Field(description="The skill's name on the card.")
    description: str = Field(description="What runs' models read of the tool.")
    tags: list[str]


class SkippedSkillOut(BaseModel):
    skill: str = Field(description="The skill's id on the agent's card.")
    reason: str


class RemoteAgentOut(BaseModel):
    id: UUID
    name: str
    card_url: str
    headers: dict[str, Any] = Field(
        description='As registered: text, or `{"secret": NAME}` (a value is never shown).'
    )
    enabled: bool
    agent_name: str = Field(description="The name its card gives it.")
    description: str = Field(description="What its card says it does.")
    streaming: bool = Field(description="Whether its card says it streams its tasks' updates.")
    skills: list[RemoteSkillOut] = Field(description="Its card's skills, as tools of runs.")
    skipped_skills: list[SkippedSkillOut] = Field(
        description="Skills that get no tool (a name another skill's also becomes)."
    )
    card: dict[str, Any] = Field(description="Its agent card as last fetched (A2A's JSON).")
    fetched_at: datetime = Field(description="When its card was last fetched.")
    created_by: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, record: RemoteAgentRecord) -> "RemoteAgentOut":
        card = card_of(record.card)
        skills, skipped = skills_of(record.name, card)
        by_id = {skill.id: skill for skill in card.skills}
        return cls.model_validate(
            {
                **record.model_dump(),
                "agent_name": card.name,
                "description": card.description,
                "streaming": card.capabilities.streaming,
                "skills": [
                    RemoteSkillOut(
                        name=skill.tool,
                        skill=skill.skill_id,
                        title=by_id[skill.skill_id].name,
                        description=skill.description,
                        tags=list(by_id[skill.skill_id].tags),
                    )
                    for skill in skills
                ],
                "skipped_skills": [SkippedSkillOut(skill=s, reason=r) for s, r in skipped],
            }
        )


class RemoteAgentList(BaseModel):
    items: list[RemoteAgentOut]
