"""The OpenAPI document, as committed in `openapi/openapi.json` (a test keeps it current)."""

import json
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.api.errors import PROBLEM_JSON
from app.config import Settings


def install_openapi(app: FastAPI) -> None:
    """Error responses are documented as `application/problem+json` only."""

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
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def openapi_json(settings: Settings | None = None) -> str:
    """Building the schema needs no database, models or secrets: the lifespan never runs."""
    from app.api.app import create_app

    document = create_app(settings).openapi()
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
