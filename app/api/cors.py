"""Cross-origin requests from browsers: pages of the configured origins (`cors_origins`) may
call the API; their preflights are answered here, before authentication (a preflight carries
no credentials). Any other origin is served as if CORS did not exist: no `access-control-*`
header at all."""

from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.errors import BAD_REQUEST, problem_response

ALLOWED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
ALLOWED_HEADERS = ("Authorization", "Content-Type", "Last-Event-ID", "Idempotency-Key")
# Every response header (Location, Retry-After, RateLimit, X-OmniForge-*...): the wildcard
# holds because these requests carry no cookies (credentials are bearer tokens).
EXPOSED_HEADERS = ("*",)
PREFLIGHT_CACHE_S = 600


class ListedOrigins(CORSMiddleware):
    """Starlette's CORS handling, for the listed origins only (exact `scheme://host[:port]`).
    A preflight that asks for a method or header the API does not take is refused with a 400
    problem."""

    def __init__(self, app: ASGIApp, origins: Sequence[str]) -> None:
        super().__init__(
            app,
            allow_origins=list(origins),
            allow_methods=ALLOWED_METHODS,
            allow_headers=ALLOWED_HEADERS,
            expose_headers=EXPOSED_HEADERS,
            max_age=PREFLIGHT_CACHE_S,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            origin = Headers(scope=scope).get("origin")
            if origin is None or not self.is_allowed_origin(origin):
                await self.app(scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    def preflight_response(self, request_headers: Headers) -> Response:
        answer = super().preflight_response(request_headers)
        if answer.status_code < 400:
            return answer
        # Starlette says which ("Disallowed CORS method, headers"), in plain text.
        refused = bytes(answer.body).decode().removeprefix("Disallowed CORS ")
        headers = {
            name: value
            for name, value in answer.headers.items()
            if name.startswith("access-control-") or name == "vary"
        }
        return problem_response(
            BAD_REQUEST,
            f"not allowed in the preflight: {refused} (the API takes the methods "
            f"{', '.join(ALLOWED_METHODS)} and the headers {', '.join(ALLOWED_HEADERS)})",
            headers=headers,
        )
