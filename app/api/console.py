"""The web console at /console: one HTML shell for every console path (the console routes in
the browser), its scripts and styles under /static/console/, and /console/config.json saying
how to sign in. Built from web/console/ with the other browser assets (scripts/_web.sh); until
it is built, /console answers 503 saying how.

The shell's Content-Security-Policy lets a console page load and call nothing but the service
itself (and, when configured, the identity provider's token endpoint): no CDN, no beacon."""

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse

from app.api.deps import State
from app.api.docs import STATIC_DIR, STATIC_URL
from app.api.errors import UNAVAILABLE, ApiError
from app.api.state import AppState

CONSOLE_URL = "/console"
_SHELL = STATIC_DIR / "console" / "index.html"
# Where the shell names the service's root path (empty, or the prefix a proxy serves it under).
_ROOT_MARK = "__OMNIFORGE_ROOT__"

router = APIRouter(include_in_schema=False)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _policy(state: AppState) -> str:
    connect = ["'self'"]
    token_url = state.settings.console_oidc_token_url
    if token_url:
        connect.append(_origin(token_url))
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            # Styles set by script (Preact, Chart.js) go through the CSSOM, which this allows.
            "style-src 'self'",
            "img-src 'self' data: blob:",
            f"connect-src {' '.join(connect)}",
            "frame-ancestors 'none'",
            "base-uri 'none'",
            "form-action 'self'",
        ]
    )


def _shell(path: Path) -> str:
    if not path.is_file():
        raise ApiError(
            UNAVAILABLE,
            "the console is not built (app/static/console/ is missing): build it with "
            "`npm ci && npm run build` in web/ (scripts/run and scripts/test do)",
        )
    return path.read_text(encoding="utf-8")


@router.get(CONSOLE_URL + "/config.json")
async def console_config(request: Request, state: State) -> JSONResponse:
    """How the console signs in: with a key or token always, and with the identity provider
    (authorization code with PKCE) when one is configured."""
    settings = state.settings
    oidc: dict[str, Any] | None = None
    if settings.console_oidc_client_id:
        oidc = {
            "client_id": settings.console_oidc_client_id,
            "authorization_url": settings.console_oidc_authorization_url,
            "token_url": settings.console_oidc_token_url,
            "scope": settings.console_oidc_scope,
        }
    return JSONResponse(
        {"oidc": oidc, "static_url": f"{request.scope.get('root_path', '')}{STATIC_URL}"}
    )


@router.get(CONSOLE_URL)
@router.get(CONSOLE_URL + "/")
@router.get(CONSOLE_URL + "/{path:path}")
async def console(request: Request, state: State, path: str = "") -> HTMLResponse:
    """The console's page; the console reads the path itself (tasks/…, agents/…)."""
    root = request.scope.get("root_path", "")
    html = _shell(_SHELL).replace(_ROOT_MARK, root)
    return HTMLResponse(
        html,
        headers={
            "Content-Security-Policy": _policy(state),
            "Cache-Control": "no-cache",
            "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff",
        },
    )
