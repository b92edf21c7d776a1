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
from litellm.types.utils import ModelResponse, Usage

litellm.suppress_debug_info = True
litellm.disable_hf_tokenizer_download = True
litellm.telemetry = False

__all__ = ["CustomLLM", "ModelResponse", "Router", "Usage", "litellm"]
