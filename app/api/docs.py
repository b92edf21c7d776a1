"""The API reference (`/docs`: Swagger UI, `/redoc`: ReDoc) and the browser assets under
`/static/`, all served by the service itself: a page of it loads nothing from elsewhere.

The assets are built from the npm packages locked in `web/` into `app/static/`
(`scripts/_web.sh`, run by `scripts/run`, `scripts/test` and the image build). Without them the
pages answer 503 saying so, never a blank page.

Each page's Content-Security-Policy lets it run the service's own scripts and its inline
set-up script (by hash) only, and load and fetch from the service only; no page of another
origin may frame it (`frame-ancestors 'none'`, `X-Frame-Options: DENY`), and nothing is
sniffed."""

import base64
import hashlib
import mimetypes
import re
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import Scope

from app.api.errors import UNAVAILABLE, ApiError
from app.api.routes import add_routes

STATIC_DIR = Path(__file__).resolve().parents[1] / "static"
STATIC_URL = "/static"
_SWAGGER_JS = "vendor/swagger-ui/swagger-ui-bundle.js"
_SWAGGER_CSS = "vendor/swagger-ui/swagger-ui.css"
_SWAGGER_ICON = "vendor/swagger-ui/favicon-32x32.png"
_REDOC_JS = "vendor/redoc/redoc.standalone.js"

router = APIRouter(include_in_schema=False)


def _assets(request: Request, *paths: str) -> list[str]:
    """The URLs of `paths` under /static/; 503 if any was not built."""
    missing = [path for path in paths if not (STATIC_DIR / path).is_file()]
    if missing:
        raise ApiError(
            UNAVAILABLE,
            f"the API reference's assets are not built ({', '.join(missing)} missing from "
            "app/static/): build them with `npm ci && npm run build` in web/ (scripts/run "
            "and scripts/test do)",
        )
    root = request.scope.get("root_path", "")
    return [f"{root}{STATIC_URL}/{path}" for path in paths]


def _openapi_url(request: Request) -> str:
    return f"{request.scope.get('root_path', '')}{request.app.openapi_url}"


# A page's inline script (Swagger UI's set-up), allowed by its hash.
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def _guarded(page: HTMLResponse) -> HTMLResponse:
    """`page` with a Content-Security-Policy allowing what it loads, and no framing."""
    html = bytes(page.body).decode()
    hashes = "".join(
        f" 'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'"
        for body in _INLINE_SCRIPT.findall(html)
    )
    policy = [
        "default-src 'none'",
        f"script-src 'self'{hashes}",
        # ReDoc's styled-components write `<style>` elements of their own at run time: styles
        # may be inline (scripts may not; a style runs no script and loads from here only).
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        # ReDoc runs its search index in a worker made from a blob.
        "worker-src 'self' blob:",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'none'",
    ]
    page.headers.update(
        {
            "Content-Security-Policy": "; ".join(policy),
            "X-Frame-Options": "DENY",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        }
    )
    return page


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    script, style, icon = _assets(request, _SWAGGER_JS, _SWAGGER_CSS, _SWAGGER_ICON)
    return _guarded(
        get_swagger_ui_html(
            openapi_url=_openapi_url(request),
            title=f"{request.app.title} — API reference",
            swagger_js_url=script,
            swagger_css_url=style,
            swagger_favicon_url=icon,
            # Swagger UI would send the document to validator.swagger.io for its badge.
            swagger_ui_parameters={"validatorUrl": None},
        )
    )


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    script, icon = _assets(request, _REDOC_JS, _SWAGGER_ICON)
    return _guarded(
        get_redoc_html(
            openapi_url=_openapi_url(request),
            title=f"{request.app.title} — API reference",
            redoc_js_url=script,
            redoc_favicon_url=icon,
            # ReDoc's page would load its fonts from Google.
            with_google_fonts=False,
        )
    )


class _BuiltAssets(StaticFiles):
    """Static files that may not be built yet: until they are, each is 404 (the pages that
    need them say why), not a server error. The build writes a gzip copy (`name.gz`) of each
    script and stylesheet; a client that accepts gzip gets it (a third of the bytes, no
    compression work per request). Content-named files (the console's) are cached for good."""

    async def check_config(self) -> None:
        if STATIC_DIR.is_dir():
            await super().check_config()

    async def get_response(self, path: str, scope: Scope) -> Response:
        gzipped = _accepts_gzip(scope) and not path.endswith(".gz")
        try:
            response = await super().get_response(f"{path}.gz" if gzipped else path, scope)
        except StarletteHTTPException as missing:  # StaticFiles raises its 404, not answers it
            if not gzipped or missing.status_code != 404:
                raise
            gzipped = False  # no gzip copy (an image): the file itself
            response = await super().get_response(path, scope)
        if gzipped and response.status_code == 404:
            response = await super().get_response(path, scope)
        elif gzipped:
            media_type = mimetypes.guess_type(path)[0] or "application/octet-stream"
            if media_type.startswith("text/") or media_type.endswith("javascript"):
                media_type += "; charset=utf-8"
            response.headers["content-type"] = media_type
            response.headers["content-encoding"] = "gzip"
        if response.status_code in (200, 304):
            response.headers["vary"] = "Accept-Encoding"
            if _CONTENT_NAMED.search(path):
                response.headers["cache-control"] = "public, max-age=31536000, immutable"
        return response


# esbuild's `[name]-[hash]` names: console-3WBBTOQ6.js
_CONTENT_NAMED = re.compile(r"-[A-Z0-9]{8}\.(js|css)$")


def _accepts_gzip(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"accept-encoding":
            return b"gzip" in value
    return False


def install_docs(app: FastAPI) -> None:
    """Serves /docs, /redoc and /static/ (create the app with `docs_url=None, redoc_url=None`,
    or FastAPI serves its own pages, which load their assets from a CDN)."""
    add_routes(app, router)
    app.mount(STATIC_URL, _BuiltAssets(directory=STATIC_DIR, check_dir=False), name="static")
