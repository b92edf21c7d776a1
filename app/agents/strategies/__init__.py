"""The built-in strategies besides ReAct: `direct`, `cot`, `tot`, `mcts`, `plan`, and `auto`,
which chooses among them by the task's complexity and falls back to simpler ones."""

from app.agents.strategies.auto import AutoAgent
from app.agents.strategies.common import Answer, StrategyAgent
from app.agents.strategies.mcts import MonteCarloAgent
from app.agents.strategies.plan import PlanAgent
from app.agents.strategies.simple import ChainOfThoughtAgent, DirectAgent
from app.agents.strategies.tot import TreeOfThoughtsAgent

__all__ = [
    "Answer",
    "AutoAgent",
    "ChainOfThoughtAgent",
    "DirectAgent",
    "MonteCarloAgent",
    "PlanAgent",
    "StrategyAgent",
    "TreeOfThoughtsAgent",
]
