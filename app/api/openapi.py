"""The OpenAPI document, as committed in `openapi/openapi.json` (a test keeps it current)."""

import json
from typing import Annotated, Any, Union, get_args

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import Field, TypeAdapter

from app.api.errors import PROBLEM_JSON, problems
from app.api.sse import EVENT_STREAM
from app.chain import ChainEvent
from app.chain.events import OutputDeltaEvent
from app.config import Settings
from app.security.visibility import StepSummary

_REF = "#/components/schemas/{model}"
_STREAM_DESCRIPTION = (
    "One Server-Sent Event per stored event of the task: `id:` its sequence number (gap-free "
    "from 1; send it back as `Last-Event-ID` to resume), `event:` its type, `data:` its JSON "
    "(`itemSchema` gives each frame's schema). A task submitted with `stream_output` also "
    "streams `output_delta` events while each LLM call runs: live only, without `id:`, never "
    "stored or replayed, each after the call's step and before the step that completes it "
    "(which holds the whole text); a subscriber that falls far behind skips some. Comments "
    "(`: keep-alive`) come while the stream is idle. The stream closes after `done`."
)
# Every event a stream may carry: the stored ones, and the live deltas.
_STREAMED: Any = Annotated[
    Union[(*get_args(get_args(ChainEvent)[0]), OutputDeltaEvent)],
    Field(discriminator="type"),
]


def _event_types() -> list[str]:
    union = get_args(get_args(_STREAMED)[0])
    return [model.model_fields["type"].default for model in union]


def _stream_item(components: dict[str, Any]) -> dict[str, Any]:
    """The schema of one SSE frame, its payload schemas added to `components`."""
    data = TypeAdapter(_STREAMED).json_schema(mode="serialization", ref_template=_REF)
    definitions = data.pop("$defs", {})
    summary = StepSummary.model_json_schema(mode="serialization", ref_template=_REF)
    definitions.update(summary.pop("$defs", {}), StepSummary=summary)
    # A reader without `chain:read_full` gets `summary` steps as a StepSummary.
    definitions["ReasoningStepEvent"]["properties"]["step"] = {
        "anyOf": [
            {"$ref": _REF.format(model="ReasoningStep")},
            {"$ref": _REF.format(model="StepSummary")},
        ]
    }
    for name, definition in definitions.items():
        components.setdefault(name, definition)
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "id": {
                "type": "string",
                "description": "The event's sequence number; `output_delta` events have none.",
            },
            "event": {"type": "string", "enum": _event_types()},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": data,
            },
        },
    }


def _document_streams_and_limits(document: dict[str, Any]) -> None:
    """Every event stream with its events' schemas; 413 on every route taking a body, 503
    (database unavailable) on every API route, 429 (the tenant's client errors) on every
    authenticated one."""
    components = document.setdefault("components", {}).setdefault("schemas", {})
    item: dict[str, Any] | None = None
    for path, operations in document["paths"].items():
        for operation in operations.values():
            responses = operation["responses"]
            for response in responses.values():
                content = response.get("content", {})
                # The task streams (the OpenAI-compatible endpoint documents its own chunks).
                if EVENT_STREAM in content and path.startswith("/api/"):
                    item = item or _stream_item(components)
                    # As OpenAPI 3.2 documents sequential media: each frame's schema.
                    content[EVENT_STREAM] = {"itemSchema": item}
                    response["description"] = f"{response['description']} {_STREAM_DESCRIPTION}"
            extra = {503} if path.startswith("/api/") else set()
            if path.startswith(("/api/", "/v1/")):
                # A tenant past `client_errors_per_minute` is refused on every route.
                extra.add(429)
            if "requestBody" in operation:
                extra.add(413)
            for status, response in problems(*sorted(extra)).items():
                responses.setdefault(str(status), _without_model(response))


def _without_model(response: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in response.items() if key != "model"}


def install_openapi(app: FastAPI) -> None:
    """Error responses are documented as `application/problem+json` only; event streams with
    the schemas of their events."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                routes=app.routes,
            )
            for operations in document["paths"].values():
                for operation in operations.values():
                    for status, response in operation["responses"].items():
                        content = response.get("content", {})
                        if int(status) >= 400 and PROBLEM_JSON in content:
                            response["content"] = {PROBLEM_JSON: content[PROBLEM_JSON]}
            _document_streams_and_limits(document)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def openapi_json(settings: Settings | None = None) -> str:
    """Building the schema needs no database, models or secrets: the lifespan never runs."""
    from app.api.app import create_app

    document = create_app(settings).openapi()
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
