"""Bearer authentication, first thing for every `/api/` request: a caller without valid
credentials learns nothing, not even whether its request body would have been valid."""

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.errors import error_response
from app.api.state import AppState
from app.security import AuthenticationFailed, Principal

API_PREFIX = "/api/"
PRINCIPAL_KEY = "principal"


class BearerAuthentication:
    """Verifies `Authorization: Bearer <JWT>` and leaves the `Principal` in the request state;
    answers 401 problem+json itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(API_PREFIX):
            await self.app(scope, receive, send)
            return
        try:
            principal = self._authenticate(scope)
        except AuthenticationFailed as exc:
            await error_response(exc)(scope, receive, send)
            return
        scope.setdefault("state", {})[PRINCIPAL_KEY] = principal
        await self.app(scope, receive, send)

    @staticmethod
    def _authenticate(scope: Scope) -> Principal:
        header = next((value for name, value in scope["headers"] if name == b"authorization"), None)
        scheme, _, token = (header or b"").decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationFailed("a bearer token is required", token_given=False)
        state: AppState = scope["app"].state.omniforge
        return state.verifier.verify(token.strip())
