"""Agent kinds: the implementations a definition's `kind` selects. The strategies `direct`,
`cot`, `react`, `tot`, `mcts`, `plan` and `auto` are built in; a plugin adds its own
`CoTAgent` subclasses under the `omniforge.agent_kinds` entry point group
(`name = "package.module:AgentClass"`), each built per task by its `from_spec`."""

import importlib.metadata
import logging
import re
from collections.abc import Mapping

from app.agents.base import AgentParts, CoTAgent
from app.agents.spec import KIND_PATTERN, AgentSpec
from app.agents.strategies import AutoAgent
from app.agents.strategies.auto import STRATEGIES
from app.errors import OmniForgeError

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "omniforge.agent_kinds"

BUILTIN: dict[str, type[CoTAgent]] = {**STRATEGIES, "auto": AutoAgent}


class UnknownAgentKind(OmniForgeError, KeyError):
    def __init__(self, kind: str, known: list[str]) -> None:
        super().__init__(kind)
        self.kind = kind
        self.known = known

    def __str__(self) -> str:
        return f"unknown agent kind {self.kind!r} (available: {', '.join(self.known)})"


class AgentKinds:
    """The agent kinds of a process: the built-in ones, then the plugins' (a plugin cannot
    replace a built-in kind)."""

    def __init__(self, kinds: Mapping[str, type[CoTAgent]] | None = None) -> None:
        self._kinds: dict[str, type[CoTAgent]] = {**BUILTIN, **(kinds or {})}

    @classmethod
    def with_plugins(cls) -> "AgentKinds":
        """The built-in kinds and every kind installed packages register."""
        kinds = cls()
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                loaded = entry.load()
            except Exception:
                logger.exception("agent kind %r (%s) could not be loaded", entry.name, entry.value)
                continue
            try:
                kinds.register(entry.name, loaded)
            except (TypeError, ValueError) as exc:
                logger.error("agent kind %r (%s) is not usable: %s", entry.name, entry.value, exc)
        return kinds

    def register(self, name: str, agent_class: object) -> None:
        if not re.fullmatch(KIND_PATTERN, name):
            raise ValueError(f"{name!r} is not a kind name ({KIND_PATTERN})")
        if not (isinstance(agent_class, type) and issubclass(agent_class, CoTAgent)):
            raise TypeError(f"{agent_class!r} is not a CoTAgent subclass")
        if name in self._kinds and self._kinds[name] is not agent_class:
            raise ValueError(f"kind {name!r} is already registered")
        self._kinds[name] = agent_class

    def names(self) -> list[str]:
        return sorted(self._kinds)

    def __contains__(self, name: object) -> bool:
        return name in self._kinds

    def build(self, spec: AgentSpec, parts: AgentParts) -> CoTAgent:
        """A new agent of `spec`'s kind, for one task."""
        agent_class = self._kinds.get(spec.kind)
        if agent_class is None:
            raise UnknownAgentKind(spec.kind, self.names())
        agent = agent_class.from_spec(spec, parts)
        agent.compact_at = parts.compact_at
        agent.kind = spec.kind
        return agent
