"""Factories for test objects: model lists pointed at the fake server, runtimes, chains, and
tasks stored as runs store them."""

from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import yaml

from app.agents import AgentRuntime, RuntimeSettings
from app.agents.base import ToolCallingMode
from app.chain import ChainMetrics, ChainStatus, ReasoningChain, TaskState
from app.config import Settings
from app.llm import LLMGateway, load_model_list
from app.storage.runs import TaskQueue
from app.storage.types import RawJSON
from app.tools.base import BaseTool
from app.tools.guards import ToolGuard
from app.tools.models import ToolCallContext
from app.tools.recording import CostRecorder
from tests.fakes.openai_server import FakeLLMServer


def fake_deployment(
    server: FakeLLMServer,
    model_name: str,
    *,
    upstream: str | None = None,
    input_cost: str | None = None,
    output_cost: str | None = None,
    native_tools: bool | None = None,
    timeout_s: float | None = None,
    deployment_id: str | None = None,
    max_input_tokens: int | None = None,
    vision: bool | None = None,
) -> dict[str, Any]:
    """A model list entry served by the fake server as `upstream` (default: `model_name`).
    Prices are strings, as a YAML author writes them."""
    params: dict[str, Any] = {
        "model": f"openai/{upstream or model_name}",
        "api_base": server.base_url,
        "api_key": "os.environ/FAKE_LLM_API_KEY",
    }
    if timeout_s is not None:
        params["timeout"] = timeout_s
    info: dict[str, Any] = {}
    if deployment_id is not None:
        info["id"] = deployment_id
    if input_cost is not None:
        info["input_cost_per_token"] = float(input_cost)
    if output_cost is not None:
        info["output_cost_per_token"] = float(output_cost)
    if native_tools is not None:
        info["supports_function_calling"] = native_tools
    if max_input_tokens is not None:
        info["max_input_tokens"] = max_input_tokens
    if vision is not None:
        info["supports_vision"] = vision
    return {"model_name": model_name, "litellm_params": params, "model_info": info}


def write_model_list(
    directory: Path,
    deployments: Sequence[dict[str, Any]],
    *,
    fallbacks: dict[str, list[str]] | None = None,
) -> Path:
    """Writes a LiteLLM `model_list` YAML, as a user would."""
    document: dict[str, Any] = {"model_list": list(deployments)}
    if fallbacks:
        document["router_settings"] = {
            "fallbacks": [{source: targets} for source, targets in fallbacks.items()]
        }
    path = directory / "models.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def gateway_for(
    directory: Path,
    deployments: Sequence[dict[str, Any]],
    *,
    fallbacks: dict[str, list[str]] | None = None,
    default_model: str = "demo",
    direct: bool = True,
    without_litellm: bool = True,
) -> LLMGateway:
    path = write_model_list(directory, deployments, fallbacks=fallbacks)
    return LLMGateway(
        load_model_list(path),
        default_model=default_model,
        direct=direct,
        without_litellm=without_litellm,
    )


def runtime_for(
    directory: Path,
    deployments: Sequence[dict[str, Any]],
    *,
    default_model: str,
    fallbacks: dict[str, list[str]] | None = None,
    tools: Sequence[BaseTool] | None = None,
    guards: Sequence[ToolGuard] = (),
    recorder: CostRecorder | None = None,
    mode: ToolCallingMode = "auto",
    **settings: Any,
) -> AgentRuntime:
    path = write_model_list(directory, deployments, fallbacks=fallbacks)
    return AgentRuntime.build(
        RuntimeSettings.model_validate(
            Settings(models_file=path, default_model=default_model, **settings)
        ),
        tools=tools,
        guards=guards,
        recorder=recorder,
        mode=mode,
    )


def new_chain(task_id: str = "task-1") -> ReasoningChain:
    return ReasoningChain(task_id=task_id, agent_id="test")


def context_for(chain: ReasoningChain, **fields: Any) -> ToolCallContext:
    return ToolCallContext(
        task_id=chain.task_id, agent_id=chain.agent_id, chain_id=chain.id, **fields
    )


def usd(text: str) -> Decimal:
    return Decimal(text)


async def stored_task(
    queue: TaskQueue,
    tenant: str,
    *,
    chain_id: UUID | None = None,
    runner_id: str | None = None,
    status: TaskState = TaskState.WORKING,
    last_seq: int = 0,
    created_at: datetime | None = None,
) -> tuple[UUID, UUID]:
    """A task and its chain as a run stores them when it starts: `(task_id, chain_id)`."""
    task_id, chain_id = uuid4(), chain_id or uuid4()
    now = created_at or datetime.now(UTC)
    await queue.create(
        {
            "id": task_id,
            "tenant_id": tenant,
            "user_id": "u",
            "status": status,
            "chain_id": chain_id,
            "request": {"input": "x"},
            "model": "demo",
            "last_seq": last_seq,
            "runner_id": runner_id,
            "owner_epoch": 0 if runner_id is None else 1,
            "created_at": now,
        },
        {
            "id": chain_id,
            "task_id": task_id,
            "tenant_id": tenant,
            "agent_id": "test",
            "status": ChainStatus.THINKING,
            "metrics": RawJSON(ChainMetrics().model_dump_json()),
            "started_at": now,
        },
    )
    return task_id, chain_id
