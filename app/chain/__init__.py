"""The reasoning chain: steps, metrics and the event union streamed to clients (pure data)."""

from app.chain.budget import Budget, BudgetLimit, RemainingBudget
from app.chain.enums import ChainStatus, ErrorCode, StepType, TaskState, ToolType, VisibilityLevel
from app.chain.events import (
    BudgetWarningEvent,
    ChainCompletedEvent,
    ChainEvent,
    ChainFailedEvent,
    ChainStartedEvent,
    DoneEvent,
    ReasoningStepEvent,
    TaskStatusEvent,
    ToolProgressEvent,
    chain_event_adapter,
)
from app.chain.models import (
    ChainMetrics,
    FailedAttempt,
    ReasoningChain,
    ReasoningStep,
    StepListener,
    SynthesisInfo,
    ThinkingInfo,
    ToolCallInfo,
    ToolResultInfo,
    VisibilityConfig,
)
from app.chain.money import USD, format_usd, quantize_usd

__all__ = [
    "USD",
    "Budget",
    "BudgetLimit",
    "BudgetWarningEvent",
    "ChainCompletedEvent",
    "ChainEvent",
    "ChainFailedEvent",
    "ChainMetrics",
    "ChainStartedEvent",
    "ChainStatus",
    "DoneEvent",
    "ErrorCode",
    "FailedAttempt",
    "ReasoningChain",
    "ReasoningStep",
    "ReasoningStepEvent",
    "RemainingBudget",
    "StepListener",
    "StepType",
    "SynthesisInfo",
    "TaskState",
    "TaskStatusEvent",
    "ThinkingInfo",
    "ToolCallInfo",
    "ToolProgressEvent",
    "ToolResultInfo",
    "ToolType",
    "VisibilityConfig",
    "VisibilityLevel",
    "chain_event_adapter",
    "format_usd",
    "quantize_usd",
]
