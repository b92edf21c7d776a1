"""The committed OpenAPI document is the app's, and documents every route's errors."""

import importlib.metadata
import json
import tomllib
from pathlib import Path
from typing import Any

from app.api.errors import PROBLEM_JSON
from app.api.openapi import openapi_json
from tests.api.test_auth import ROUTES

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "openapi" / "openapi.json"


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
    return [
        (method, path, operation)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    ]


def test_the_committed_document_is_what_the_app_generates() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == openapi_json(), (
        "openapi/openapi.json is stale: run `omniforge openapi --output openapi/openapi.json`"
    )


def test_the_documents_version_is_the_packages() -> None:
    """The version in pyproject.toml, as installed: an editable install keeps the version it
    was installed with, so a bump shows here until the package is installed again."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert importlib.metadata.version(project["name"]) == project["version"]
    assert document["info"]["version"] == project["version"]


def test_every_api_route_documents_its_errors_as_problem_details() -> None:
    api = [(m, p, op) for m, p, op in _operations() if p.startswith(("/api/v1/", "/v1/"))]
    assert {f"{m.upper()} {p}" for m, p, _ in api} == {str(route) for route in ROUTES}
    for method, path, operation in api:
        responses = operation["responses"]
        assert {"401", "403"} <= responses.keys(), (method, path)
        if operation.get("parameters") or "requestBody" in operation:
            assert "422" in responses, (method, path)
        if "{" in path:
            assert "404" in responses, (method, path)
        for status, response in responses.items():
            if int(status) >= 400:
                assert list(response["content"]) == [PROBLEM_JSON], (method, path, status)
        assert operation["security"] == [{"HTTPBearer": []}], (method, path)


def test_submission_documents_its_rate_limit_refusal() -> None:
    [submit] = [op for m, p, op in _operations() if (m, p) == ("post", "/api/v1/tasks")]
    assert list(submit["responses"]["429"]["content"]) == [PROBLEM_JSON]


def test_health_routes_need_no_token() -> None:
    health = {p: op for m, p, op in _operations() if not p.startswith(("/api/", "/v1/"))}
    assert set(health) == {"/healthz", "/readyz", "/metrics"}
    assert all("security" not in operation for operation in health.values())


def test_event_streams_document_each_event_type_and_its_payload() -> None:
    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
    streams = [
        (method, path, response["content"]["text/event-stream"])
        for method, path, operation in _operations()
        for response in operation["responses"].values()
        if "text/event-stream" in response.get("content", {}) and path.startswith("/api/")
    ]
    assert {(m, p) for m, p, _ in streams} == {
        ("post", "/api/v1/tasks"),
        ("get", "/api/v1/tasks/{task_id}/events"),
    }
    schemas = document["components"]["schemas"]
    for _, _, stream in streams:
        frame = stream["itemSchema"]
        # Live deltas have no id: they are not stored, so nothing resumes from them.
        assert frame["required"] == ["event", "data"]
        assert "output_delta" in frame["properties"]["id"]["description"]
        events = frame["properties"]["event"]["enum"]
        assert set(events) == {
            "chain_started",
            "task_status",
            "reasoning_step",
            "budget_warning",
            "tool_progress",
            "approval_required",
            "approval_decided",
            "chain_completed",
            "chain_failed",
            "done",
            "output_delta",
        }
        data = frame["properties"]["data"]
        assert data["contentMediaType"] == "application/json"
        payloads = [ref["$ref"].rsplit("/", 1)[1] for ref in data["contentSchema"]["oneOf"]]
        for payload in payloads:
            assert schemas[payload]["properties"]["type"]["const"] in events
        # A reader without full access gets a summary step as a StepSummary.
        step = schemas["ReasoningStepEvent"]["properties"]["step"]["anyOf"]
        assert {ref["$ref"] for ref in step} == {
            "#/components/schemas/ReasoningStep",
            "#/components/schemas/StepSummary",
        }


def test_routes_taking_a_body_document_413_and_every_api_route_503() -> None:
    for method, path, operation in _operations():
        responses = operation["responses"]
        if "requestBody" in operation:
            assert "413" in responses, (method, path)
        if path.startswith("/api/"):
            assert "503" in responses, (method, path)


def test_the_openai_compatible_stream_documents_its_chunk_frames() -> None:
    [completion] = [op for m, p, op in _operations() if (m, p) == ("post", "/v1/chat/completions")]
    content = completion["responses"]["200"]["content"]
    assert set(content) == {"application/json", "text/event-stream"}
    frame = content["text/event-stream"]["itemSchema"]
    assert frame["required"] == ["data"]
    assert "[DONE]" in frame["properties"]["data"]["description"]


def test_the_answer_has_one_name_and_its_old_one_is_marked_deprecated() -> None:
    schemas = json.loads(COMMITTED.read_text(encoding="utf-8"))["components"]["schemas"]
    for name in ("TaskOut", "TurnOut"):
        fields = schemas[name]["properties"]
        assert "answer" in fields
        assert fields["result"]["deprecated"] is True
        assert "deprecated" not in fields["answer"]
