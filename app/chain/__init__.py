"""The reasoning chain: steps, metrics and the event union streamed to clients (pure data)."""

from app.chain.enums import ChainStatus, ErrorCode, StepType, TaskState, ToolType, VisibilityLevel
from app.chain.events import (
    ChainCompletedEvent,
    ChainEvent,
    ChainFailedEvent,
    ChainStartedEvent,
    DoneEvent,
    ReasoningStepEvent,
    TaskStatusEvent,
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
    "StepListener",
    "StepType",
    "SynthesisInfo",
    "TaskState",
    "TaskStatusEvent",
    "ThinkingInfo",
    "ToolCallInfo",
    "ToolResultInfo",
    "ToolType",
    "VisibilityConfig",
    "VisibilityLevel",
    "chain_event_adapter",
    "format_usd",
    "quantize_usd",
]
