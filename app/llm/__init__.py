"""The LLM gateway over LiteLLM: model list, router with fallbacks, cost, the demo model."""

from app.llm.config import DEMO_MODEL, ModelList, load_model_list
from app.llm.errors import LLMCallError, LLMErrorKind, ModelConfigError, UnknownModelError
from app.llm.gateway import LLMEstimate, LLMGateway
from app.llm.pricing import Deployment
from app.llm.types import LLMDelta, LLMRequest, LLMResponse, LLMToolCall, ModelPrice

__all__ = [
    "DEMO_MODEL",
    "Deployment",
    "LLMCallError",
    "LLMDelta",
    "LLMErrorKind",
    "LLMEstimate",
    "LLMGateway",
    "LLMRequest",
    "LLMResponse",
    "LLMToolCall",
    "ModelConfigError",
    "ModelList",
    "ModelPrice",
    "UnknownModelError",
    "load_model_list",
]
