"""The only place that imports LiteLLM: it is configured for offline use before the import.

Without LITELLM_LOCAL_MODEL_COST_MAP, importing LiteLLM fetches its price map from the
internet; tokenizer downloads for some model names stall for ~24 s. Both are switched off.
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_DISABLE_BUG_REPORT_LINK", "true")
os.environ.setdefault("LITELLM_LOG", "ERROR")

import litellm
from litellm import CustomLLM, Router
from litellm.router_utils.pre_call_checks.io_token_rate_limit_check import (
    deployment_has_io_token_limits,
)
from litellm.types.utils import ModelResponse, Usage

litellm.suppress_debug_info = True
litellm.disable_hf_tokenizer_download = True
litellm.telemetry = False


def use_openai_sdk(enabled: bool) -> None:
    """Whether `openai/` models go through the OpenAI SDK (LiteLLM's default) or LiteLLM's own
    HTTP handler. The handler skips the SDK's request transform and response model building,
    about 1 ms of CPU per call; LiteLLM reads the switch on every call."""
    os.environ["EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"] = "false" if enabled else "true"


__all__ = [
    "CustomLLM",
    "ModelResponse",
    "Router",
    "Usage",
    "deployment_has_io_token_limits",
    "litellm",
    "use_openai_sdk",
]
