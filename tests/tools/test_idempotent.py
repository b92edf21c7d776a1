"""Which tools may be called again when a run resumes and a call's outcome is unknown: a tool
says so in its definition (`idempotent`); one that does not is never repeated. Every built-in
tool decides explicitly: reads and pure computations may be repeated, anything with a side
effect may not, and the LLM may."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.chain import ToolType
from app.tools.builtin import builtin_tools
from app.tools.builtin.llm import LLM_TOOL_NAME, LLMTool
from app.tools.models import ToolDefinition
from app.tools.registry import ToolRegistry
from tests.api.tools import AdminReport, VaultStore
from tests.factories import fake_deployment, gateway_for
from tests.fakes.openai_server import FakeLLMServer

BUILTIN_DECISIONS = {
    "calculator": True,
    "current_time": True,
    "list_files": True,
    "read_file": True,
    "search_files": True,
    "web_fetch": True,
    "http_request": False,
    "json_query": True,
    "text_transform": True,
    "todo_add": False,
    "todo_list": True,
    "todo_complete": False,
    "todo_delete": False,
}


def test_a_definition_that_does_not_say_is_not_idempotent() -> None:
    definition = ToolDefinition(name="deploy", type=ToolType.CUSTOM, description="Deploys.")

    assert definition.idempotent is False


def test_the_declaration_is_part_of_the_frozen_definition() -> None:
    definition = ToolDefinition(
        name="lookup", type=ToolType.CUSTOM, description="Looks up.", idempotent=True
    )

    assert definition.idempotent is True
    with pytest.raises(ValidationError, match="frozen"):
        definition.idempotent = False  # type: ignore[misc]
    with pytest.raises(ValidationError, match="idempotent"):
        ToolDefinition.model_validate(
            {"name": "x", "type": ToolType.CUSTOM, "description": "x", "idempotent": "sometimes"}
        )


def test_every_builtin_tool_declares_whether_it_may_be_repeated() -> None:
    tools = builtin_tools()

    assert {tool.definition.name: tool.definition.idempotent for tool in tools} == (
        BUILTIN_DECISIONS
    )
    # Each says so itself rather than falling back on the default.
    assert all("idempotent" in tool.definition.model_fields_set for tool in tools)


def test_the_llm_tool_may_be_repeated(tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    gateway = gateway_for(tmp_path, [fake_deployment(fake_llm, "m")], default_model="m")
    tool = LLMTool(gateway, ToolRegistry())

    assert tool.definition.name == LLM_TOOL_NAME
    assert tool.definition.idempotent is True
    assert "idempotent" in tool.definition.model_fields_set


def test_an_operators_own_tools_are_not_repeated_unless_they_say_so() -> None:
    assert VaultStore().definition.idempotent is False
    assert AdminReport().definition.idempotent is False
