"""The model list, in LiteLLM's own `model_list` YAML format (a LiteLLM proxy config works).

```yaml
model_list:
  - model_name: primary                     # what tasks ask for (a router group)
    litellm_params:
      model: openai/gpt-4o-mini             # LiteLLM provider/model
      api_base: https://api.openai.com/v1
      api_key: os.environ/OPENAI_API_KEY    # resolved from the environment at start-up
      timeout: 30                           # per request to this deployment
    model_info:
      id: openai-mini                       # optional; shown as the deployment that answered
      input_cost_per_token: 0.00000015      # optional; else LiteLLM's price map, else unpriced
      output_cost_per_token: 0.0000006
router_settings:
  fallbacks: [{primary: [backup]}]
```
"""

import os
from pathlib import Path
from typing import Any, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from app.llm.errors import ModelConfigError

ENV_REFERENCE_PREFIX = "os.environ/"
DEMO_MODEL = "demo"
DEMO_PROVIDER = "omniforge_demo"
CUSTOM_PRICE_KEYS = ("input_cost_per_token", "output_cost_per_token")


class DeploymentConfig(BaseModel):
    """One entry of `model_list`; extra keys (tpm, rpm…) pass through to the router."""

    model_config = ConfigDict(extra="allow")

    model_name: str = Field(min_length=1)
    litellm_params: dict[str, Any]
    model_info: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names_a_model(self) -> Self:
        model = self.litellm_params.get("model")
        if not isinstance(model, str) or not model:
            raise ValueError(f"deployment {self.model_name!r}: litellm_params.model is required")
        return self

    @property
    def litellm_model(self) -> str:
        return str(self.litellm_params["model"])

    @property
    def has_custom_price(self) -> bool:
        return any(self.model_info.get(key) is not None for key in CUSTOM_PRICE_KEYS)


class ModelList(BaseModel):
    """`model_list` plus the `router_settings` the router understands; other sections of a
    LiteLLM proxy config are ignored."""

    model_config = ConfigDict(extra="ignore")

    model_list: list[DeploymentConfig] = Field(min_length=1)
    router_settings: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _fallbacks_name_known_models(self) -> Self:
        names = self.model_names()
        for source, targets in self.fallbacks().items():
            for name in [source, *targets]:
                if name not in names and name != "*":
                    raise ValueError(f"router_settings.fallbacks names unknown model {name!r}")
        return self

    def model_names(self) -> list[str]:
        return list(dict.fromkeys(d.model_name for d in self.model_list))

    def fallbacks(self) -> dict[str, list[str]]:
        raw = self.router_settings.get("fallbacks") or []
        if not isinstance(raw, list):
            raise ValueError("router_settings.fallbacks must be a list of {model: [fallbacks]}")
        result: dict[str, list[str]] = {}
        for entry in raw:
            if not isinstance(entry, dict):
                raise ValueError("router_settings.fallbacks entries look like {primary: [backup]}")
            for source, targets in entry.items():
                result[str(source)] = [str(t) for t in (targets or [])]
        return result


def demo_deployment() -> DeploymentConfig:
    """The offline demo model: in-process, free, tool-using."""
    return DeploymentConfig(
        model_name=DEMO_MODEL,
        litellm_params={"model": f"{DEMO_PROVIDER}/{DEMO_MODEL}"},
        model_info={
            "id": DEMO_MODEL,
            "input_cost_per_token": 0,
            "output_cost_per_token": 0,
            "supports_function_calling": True,
            "mode": "chat",
        },
    )


def load_model_list(path: Path | None) -> ModelList:
    """Reads the model list (or none) and adds the demo model unless the file defines one."""
    deployments: list[Any] = [demo_deployment()]
    router_settings: dict[str, Any] = {}
    if path is not None:
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ModelConfigError(f"cannot read model list {path}: {exc}") from exc
        if not isinstance(document, dict) or not isinstance(document.get("model_list"), list):
            raise ModelConfigError(f"{path}: expected a mapping with a `model_list` list")
        deployments = document["model_list"]
        router_settings = document.get("router_settings") or {}
        if deployments and not _defines_demo(deployments):
            # Added before validation, so fallbacks may name the demo model.
            deployments = [*deployments, demo_deployment()]
    try:
        model_list = ModelList(model_list=deployments, router_settings=router_settings)
    except ValidationError as exc:
        raise ModelConfigError(f"{path or 'model list'}: {_describe(exc)}") from exc
    missing = missing_environment(model_list)
    if missing:
        raise ModelConfigError(
            f"{path}: environment variables referenced with {ENV_REFERENCE_PREFIX} are not set: "
            + ", ".join(missing)
        )
    return model_list


def missing_environment(model_list: ModelList) -> list[str]:
    """`os.environ/NAME` references whose variable is unset, as `model: NAME`. LiteLLM resolves
    them when the router is built and would otherwise fail only at call time."""
    missing: list[str] = []
    for deployment in model_list.model_list:
        for value in deployment.litellm_params.values():
            if isinstance(value, str) and value.startswith(ENV_REFERENCE_PREFIX):
                name = value.removeprefix(ENV_REFERENCE_PREFIX)
                if name not in os.environ:
                    missing.append(f"{deployment.model_name}: {name}")
    return missing


def _defines_demo(deployments: list[Any]) -> bool:
    return any(isinstance(d, dict) and d.get("model_name") == DEMO_MODEL for d in deployments)


def _describe(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or 'model list'}: {error['msg']}"
        for error in exc.errors()
    )
