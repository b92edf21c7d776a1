"""The LLM gateway over LiteLLM: model list, router with fallbacks, cost, the demo model.

LiteLLM's import costs seconds of CPU. The gateway is built without it and loads it in the
background or on first use (`app.llm.backend`); the gateway and the deployments' prices are
imported on first use too (`app.llm.LLMGateway`), so that code needing only the model list,
the request types or the errors (a CLI command, the governance layer) pays for neither."""

from typing import TYPE_CHECKING

from app.lazy import lazy_attributes
from app.llm.config import DEMO_MODEL, ModelList, load_model_list
from app.llm.errors import LLMCallError, LLMErrorKind, ModelConfigError, UnknownModelError
from app.llm.types import (
    LLMDelta,
    LLMEstimate,
    LLMRequest,
    LLMResponse,
    LLMToolCall,
    ModelPrice,
)

if TYPE_CHECKING:
    from app.llm.gateway import LLMGateway
    from app.llm.pricing import Deployment

__getattr__ = lazy_attributes(
    __name__,
    {
        "LLMGateway": "app.llm.gateway",
        "Deployment": "app.llm.pricing",
    },
)

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
