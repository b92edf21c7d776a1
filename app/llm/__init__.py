"""The LLM gateway over LiteLLM: model list, router with fallbacks, cost, the demo model.

The gateway and the deployments' prices need LiteLLM, whose import costs seconds of CPU: they
are imported on first use (`app.llm.LLMGateway`), so that code needing only the model list, the
request types or the errors (a CLI command, the governance layer) does not pay for it."""

from typing import TYPE_CHECKING

from app.lazy import lazy_attributes
from app.llm.config import DEMO_MODEL, ModelList, load_model_list
from app.llm.errors import LLMCallError, LLMErrorKind, ModelConfigError, UnknownModelError
from app.llm.types import LLMDelta, LLMRequest, LLMResponse, LLMToolCall, ModelPrice

if TYPE_CHECKING:
    from app.llm.gateway import LLMEstimate, LLMGateway
    from app.llm.pricing import Deployment

__getattr__ = lazy_attributes(
    __name__,
    {
        "LLMEstimate": "app.llm.gateway",
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
