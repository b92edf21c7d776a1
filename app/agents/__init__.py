"""Agents: the reasoning engine, the CoTAgent base and the ReAct agent."""

from app.agents.base import AgentParts, CoTAgent
from app.agents.engine import LLMCallResult, ModelToolCall, ReasoningEngine
from app.agents.kinds import AgentKinds, UnknownAgentKind
from app.agents.models import AgentTask
from app.agents.parser import ReActStep, parse_react
from app.agents.react import ReActAgent
from app.agents.run import AgentRun
from app.agents.run_events import Relayed, RunEvent
from app.agents.runtime import AgentRuntime, RuntimeSettings
from app.agents.spec import AgentSpec

__all__ = [
    "AgentKinds",
    "AgentParts",
    "AgentRun",
    "AgentRuntime",
    "AgentSpec",
    "AgentTask",
    "CoTAgent",
    "LLMCallResult",
    "ModelToolCall",
    "ReActAgent",
    "ReActStep",
    "ReasoningEngine",
    "Relayed",
    "RunEvent",
    "RuntimeSettings",
    "UnknownAgentKind",
    "parse_react",
]
