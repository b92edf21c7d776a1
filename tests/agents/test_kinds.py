"""Agent kinds: `react` is built in; installed packages add theirs through the
`omniforge.agent_kinds` entry point group, and a definition's `kind` picks one."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.agents import AgentKinds, AgentParts, AgentSpec, AgentTask, ReActAgent, UnknownAgentKind
from app.agents.kinds import ENTRY_POINT_GROUP
from app.chain import ChainCompletedEvent
from tests.agents.echo_kind import EchoAgent
from tests.factories import fake_deployment, runtime_for
from tests.fakes.openai_server import FakeLLMServer


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[None]:
    """A distribution on sys.path, as `pip install` leaves one, registering two kinds: one
    usable, one that is not a CoTAgent."""
    dist = tmp_path / "echo_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n"
        "echo = tests.agents.echo_kind:EchoAgent\n"
        "broken = tests.agents.echo_kind:NotAnAgent\n"
        "missing = tests.agents.no_such_module:Agent\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        yield
    finally:
        sys.path.remove(str(tmp_path))


def test_plugins_add_kinds_and_unusable_ones_are_left_out(installed_plugin: None) -> None:
    kinds = AgentKinds.with_plugins()
    assert "echo" in kinds
    assert "react" in kinds
    assert "broken" not in kinds
    assert "missing" not in kinds


def test_a_plugin_cannot_replace_a_built_in_kind() -> None:
    kinds = AgentKinds()
    with pytest.raises(ValueError, match="already registered"):
        kinds.register("react", EchoAgent)
    with pytest.raises(TypeError):
        kinds.register("other", object)


async def test_a_definitions_kind_builds_its_agent(
    installed_plugin: None, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = runtime_for(tmp_path, [fake_deployment(fake_llm, "m")], default_model="m")
    kinds = AgentKinds.with_plugins()
    parts: AgentParts = runtime.parts
    echo = kinds.build(AgentSpec(kind="echo"), parts)
    assert isinstance(echo, EchoAgent)
    react = kinds.build(AgentSpec(instructions="Be terse.", max_iterations=3), parts)
    assert isinstance(react, ReActAgent)
    assert (react.instructions, react.max_iterations) == ("Be terse.", 3)
    events = [event async for event in echo.process_task(AgentTask(input="hello"))]
    completed = [e for e in events if isinstance(e, ChainCompletedEvent)]
    assert completed[0].answer == "echo: hello"
    with pytest.raises(UnknownAgentKind):
        kinds.build(AgentSpec(kind="nope"), parts)
