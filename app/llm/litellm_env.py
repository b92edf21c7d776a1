"""The only place that imports LiteLLM: it is configured for offline use before the import.

Without LITELLM_LOCAL_MODEL_COST_MAP, importing LiteLLM fetches its price map from the
internet; tokenizer downloads for some model names stall for ~24 s. Both are switched off.
LiteLLM also sizes its connection pool (aiohttp, used by the OpenAI SDK path too) from the
environment at import, 500 connections per host unless told, and a call beyond the pool waits
for a connection: `OMNIFORGE_LLM_MAX_CONNECTIONS` is put there first.
"""

import os

from app.llm.connections import DEFAULT_MAX_CONNECTIONS, MAX_CONNECTIONS

os.environ["AIOHTTP_CONNECTOR_LIMIT"] = str(MAX_CONNECTIONS)
os.environ["AIOHTTP_CONNECTOR_LIMIT_PER_HOST"] = str(MAX_CONNECTIONS)
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_DISABLE_BUG_REPORT_LINK", "true")
os.environ.setdefault("LITELLM_LOG", "ERROR")

# LiteLLM reads the environment as it is imported: these imports must follow the lines above.
import litellm
from litellm import CustomLLM, Router
from litellm.litellm_core_utils.core_helpers import map_finish_reason
from litellm.litellm_core_utils.prompt_templates.common_utils import (
    drop_non_python_regex_patterns,
    tool_with_sanitized_parameters,
)
from litellm.router_utils.pre_call_checks.io_token_rate_limit_check import (
    deployment_has_io_token_limits,
)
from litellm.types.utils import LlmProviders, ModelResponse, Usage
from litellm.utils import ProviderConfigManager

litellm.suppress_debug_info = True
litellm.disable_hf_tokenizer_download = True
litellm.telemetry = False


def use_openai_sdk(enabled: bool) -> None:
    """Whether `openai/` models go through the OpenAI SDK (LiteLLM's default) or LiteLLM's own
    HTTP handler. The handler skips the SDK's request transform and response model building,
    about 1 ms of CPU per call; LiteLLM reads the switch on every call."""
    os.environ["EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"] = "false" if enabled else "true"


__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "MAX_CONNECTIONS",
    "CustomLLM",
    "LlmProviders",
    "ModelResponse",
    "ProviderConfigManager",
    "Router",
    "Usage",
    "deployment_has_io_token_limits",
    "drop_non_python_regex_patterns",
    "litellm",
    "map_finish_reason",
    "tool_with_sanitized_parameters",
    "use_openai_sdk",
]
