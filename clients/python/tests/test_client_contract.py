"""The client's models and request arguments against the service's OpenAPI document, so that
drift between them fails here; its events and errors as the stream and problems give them."""

import inspect
import json
from pathlib import Path
from typing import Any, get_type_hints

import httpx
import pytest
from omniforge_client import _async, _sync, errors, events, inputs, models
from omniforge_client.events import UnknownEvent, parse_event
from omniforge_client.models import ApiModel
from pydantic import BaseModel

OPENAPI = Path(__file__).parents[3] / "openapi" / "openapi.json"
SCHEMAS: dict[str, Any] = json.loads(OPENAPI.read_text())["components"]["schemas"]


def _api_models() -> list[type[ApiModel]]:
    found = {
        cls
        for module in (models, events)
        for cls in vars(module).values()
        if isinstance(cls, type) and issubclass(cls, ApiModel) and "api_schema" in vars(cls)
    }
    return sorted(found, key=lambda cls: cls.__name__)


def _fields(cls: type[BaseModel]) -> dict[str, bool]:
    """Each field by its name in the API, and whether it is required."""
    return {info.alias or name: info.is_required() for name, info in cls.model_fields.items()}


def test_every_public_model_names_its_schema() -> None:
    unnamed = [
        name
        for module in (models, events)
        for name, cls in vars(module).items()
        if isinstance(cls, type)
        and issubclass(cls, ApiModel)
        and cls.__module__ == module.__name__
        and "api_schema" not in vars(cls)
        and name not in {"ApiModel", "Page", "Event"}
        and "[" not in name  # a parametrised generic (`Page[Task]`) pydantic keeps
    ]
    assert unnamed == []
    assert len(_api_models()) >= 35


@pytest.mark.parametrize("cls", _api_models(), ids=lambda cls: cls.__name__)
def test_a_model_has_its_schemas_fields_and_requires_what_it_requires(
    cls: type[ApiModel],
) -> None:
    schema = SCHEMAS[cls.api_schema]
    ours = _fields(cls)
    assert set(ours) == set(schema["properties"]), cls.api_schema
    missing = [name for name in schema.get("required", []) if not ours[name]]
    assert missing == [], f"{cls.__name__} does not require {missing}"


@pytest.mark.parametrize(
    ("typed", "schema", "besides"),
    [
        (inputs.TaskOptions, "TaskSubmission", {"input", "messages"}),
        (inputs.AgentDefinition, "AgentCreate", {"name"}),
        (inputs.AgentChanges, "AgentUpdate", set()),
        (inputs.BudgetLimits, "Budget-Input", set()),
    ],
)
def test_request_arguments_are_the_request_schemas_fields(
    typed: type, schema: str, besides: set[str]
) -> None:
    assert set(get_type_hints(typed)) | besides == set(SCHEMAS[schema]["properties"])


@pytest.mark.parametrize("client", [_sync.Conversations, _async.AsyncConversations])
def test_starting_a_conversation_takes_its_schemas_fields(client: type) -> None:
    parameters = set(inspect.signature(client.create).parameters) - {"self"}
    assert parameters == set(SCHEMAS["ConversationCreate"]["properties"])


def test_every_problem_type_of_the_service_has_its_error_class() -> None:
    from app.errors import problem_catalogue

    slugs = {problem.slug for problem in problem_catalogue()}
    assert slugs <= set(errors._BY_SLUG)
    for slug in slugs:
        assert errors._BY_SLUG[slug].__name__ != "APIError"


def test_an_unknown_problem_type_gets_the_class_of_its_status() -> None:
    request = httpx.Request("GET", "http://service/")
    teapot = {"type": "https://omniforge.dev/problems/new-kind", "status": 409, "detail": "new"}
    conflict = errors.error_from(httpx.Response(409, json=teapot, request=request))
    gateway = errors.error_from(
        httpx.Response(502, text="<html>bad gateway</html>", request=request)
    )

    assert type(conflict) is errors.Conflict
    assert conflict.slug == "new-kind"
    assert type(gateway) is errors.ServerError
    assert gateway.detail == "<html>bad gateway</html>"


def test_an_unknown_event_type_is_kept_not_refused() -> None:
    event = parse_event("plan_updated", '{"plan": ["a", "b"]}', 9)
    text = parse_event("note", "not json", None)

    assert isinstance(event, UnknownEvent)
    assert (event.type, event.data, event.event_id) == ("plan_updated", {"plan": ["a", "b"]}, 9)
    assert isinstance(text, UnknownEvent)
    assert text.data == "not json"


def test_a_summary_step_arrives_as_a_summary() -> None:
    data = {
        "task_id": "t",
        "chain_id": "7b0c6a8e-3f7e-4a53-9a55-64b2f3a8f0a1",
        "timestamp": "2026-01-01T00:00:00Z",
        "type": "reasoning_step",
        "step": {
            "id": "0c1b6d3e-1f2a-4b5c-8d9e-0f1a2b3c4d5e",
            "step_number": 3,
            "type": "tool_call",
            "timestamp": "2026-01-01T00:00:00Z",
            "parent_step_id": None,
            "visibility": {"level": "summary", "summary": "a tool was called"},
        },
        "metrics": {},
    }
    event = parse_event("reasoning_step", json.dumps(data), 3)

    assert isinstance(event, events.ReasoningStepEvent)
    assert isinstance(event.step, models.StepSummary)
    assert event.step.visibility.summary == "a tool was called"
