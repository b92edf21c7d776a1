"""Bearer authentication, first thing for every `/api/` request: a caller without valid
credentials learns nothing, not even whether its request body would have been valid; a
caller whose tenant is unknown or disabled is refused next."""

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.errors import error_response
from app.api.state import AppState
from app.runs.errors import TenantRefused
from app.security import AuthenticationFailed, Principal

API_PREFIX = "/api/"
# Tokens of real identity providers stay far below this; a larger header is refused before
# it is parsed.
MAX_AUTHORIZATION_BYTES = 8192
PRINCIPAL_KEY = "principal"
TENANT_KEY = "tenant"


class BearerAuthentication:
    """Verifies `Authorization: Bearer <JWT>` and the token's tenant, and leaves the
    `Principal` and its `Tenant` in the request state; answers 401 (403 for the tenant)
    problem+json itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(API_PREFIX):
            await self.app(scope, receive, send)
            return
        state: AppState = scope["app"].state.omniforge
        try:
            principal = await self._authenticate(state, scope)
            tenant = await state.tenants.get(principal.tenant_id)
            if tenant is None or not tenant.is_active:
                raise TenantRefused(principal.tenant_id, disabled=tenant is not None)
        except (AuthenticationFailed, TenantRefused) as exc:
            await error_response(exc)(scope, receive, send)
            return
        request_state = scope.setdefault("state", {})
        request_state[PRINCIPAL_KEY] = principal
        request_state[TENANT_KEY] = tenant
        await self.app(scope, receive, send)

    @staticmethod
    async def _authenticate(state: AppState, scope: Scope) -> Principal:
        header = next((value for name, value in scope["headers"] if name == b"authorization"), None)
        if header is not None and len(header) > MAX_AUTHORIZATION_BYTES:
            raise AuthenticationFailed(
                f"the Authorization header is longer than {MAX_AUTHORIZATION_BYTES} bytes"
            )
        scheme, _, token = (header or b"").decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationFailed("a bearer token is required", token_given=False)
        return await state.verifier.verify(token.strip())
