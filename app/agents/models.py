"""What an agent is asked to do."""

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.ids import uuid4


class AgentTask(BaseModel):
    """A task: a text `input` or a list of chat `messages`, and how it may be run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default_factory=lambda: str(uuid4()), min_length=1, max_length=255)
    input: str | None = Field(default=None, min_length=1)
    messages: list[dict[str, Any]] | None = Field(default=None, min_length=1)
    tenant_id: str | None = None
    user_id: str | None = None
    model: str | None = None
    tools: list[str] | None = Field(
        default=None, description="The tools this task may use; None for every tool."
    )
    roles: frozenset[str] | None = Field(
        default=None,
        description="The submitting caller's roles: tools it may not use are not offered, and "
        "calls to them are refused. None: no caller to check (library use).",
    )
    metadata: dict[str, Any] = Field(default_factory=dict)
    history: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Earlier turns of the task's conversation as chat messages in OpenAI "
        "format (inputs, the model's tool calls, tool results, answers), in order; the model "
        "sees them before this task's own messages.",
    )

    attachments: list[str] = Field(
        default_factory=list,
        description="One line per file given to the task (its id, name and type): the model "
        "is told of them after the task, and reads them with the file tools.",
    )

    @model_validator(mode="after")
    def _one_input(self) -> Self:
        if (self.input is None) == (self.messages is None):
            raise ValueError("a task has either `input` or `messages`")
        return self

    def conversation(self) -> list[dict[str, Any]]:
        """The task as chat messages, then a note of its attached files."""
        if self.messages is not None:
            messages = [dict(message) for message in self.messages]
        else:
            messages = [{"role": "user", "content": self.input}]
        if self.attachments:
            listing = "\n".join(f"- {line}" for line in self.attachments)
            messages.append(
                {
                    "role": "user",
                    "content": "Files attached to this task (read them with the file tools, "
                    f"by id):\n{listing}",
                }
            )
        return messages
