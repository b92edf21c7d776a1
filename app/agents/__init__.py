"""Agents: the reasoning engine, the CoTAgent base and the ReAct agent."""

from app.agents.base import AgentRun, CoTAgent
from app.agents.engine import LLMCallResult, ModelToolCall, ReasoningEngine
from app.agents.models import AgentTask
from app.agents.parser import ReActStep, parse_react
from app.agents.react import ReActAgent
from app.agents.runtime import AgentRuntime, RuntimeSettings

__all__ = [
    "AgentRun",
    "AgentRuntime",
    "AgentTask",
    "CoTAgent",
    "LLMCallResult",
    "ModelToolCall",
    "ReActAgent",
    "ReActStep",
    "ReasoningEngine",
    "RuntimeSettings",
    "parse_react",
]
