"""The service's address itself (`/`): a person opening it in a browser is sent on to the web
console; an API client asking for JSON gets a small index of where things are. No token is
needed, and it is not an API route: like the console and the reference pages, it is kept out
of the OpenAPI document."""

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from app.api.console import CONSOLE_URL

router = APIRouter(include_in_schema=False)

# The answer depends on `Accept`: caches must keep the redirect and the index apart.
_VARY = {"Vary": "Accept"}


def _quality(accept: str, media_type: str) -> float:
    """How much `accept` wants `media_type` (its `q`, by the most specific range naming it)."""
    ranges: dict[str, float] = {}
    for part in accept.split(","):
        media, *params = (piece.strip() for piece in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        ranges[media.lower()] = max(q, ranges.get(media.lower(), 0.0))
    family = media_type.split("/")[0] + "/*"
    for candidate in (media_type, family, "*/*"):
        if candidate in ranges:
            return ranges[candidate]
    return 0.0


def _prefers_json(request: Request) -> bool:
    """JSON only when asked for above HTML: a browser names `text/html` first, and a client
    taking anything (`*/*`, or no `Accept`) is sent where a person would be."""
    accept = request.headers.get("accept", "")
    return _quality(accept, "application/json") > _quality(accept, "text/html")


@router.get("/")
async def root(request: Request) -> Response:
    """307, not a permanent 308: the answer depends on `Accept`, and a browser would keep a
    permanent redirect for good, whatever the console's address becomes."""
    root_path = request.scope.get("root_path", "")
    app = request.app
    console = f"{root_path}{CONSOLE_URL}"
    if not _prefers_json(request):
        return RedirectResponse(console, status_code=307, headers=_VARY)
    return JSONResponse(
        {
            "name": app.title,
            "version": app.version,
            "links": {
                "docs": f"{root_path}{app.url_path_for('swagger_ui')}",
                "openapi": f"{root_path}{app.openapi_url}",
                "console": console,
                "healthz": f"{root_path}{app.url_path_for('healthz')}",
            },
        },
        headers=_VARY,
    )
