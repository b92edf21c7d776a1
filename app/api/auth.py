"""Bearer authentication, first thing for every `/api/` request: a caller without valid
credentials learns nothing, not even whether its request body would have been valid; a
caller whose tenant is unknown or disabled is refused next."""

import re
from urllib.parse import parse_qs
from uuid import UUID

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.errors import error_response
from app.api.state import AppState
from app.governance.api_keys import KeyGrant
from app.observability.log_context import tenant_logged_as
from app.runs.errors import TenantRefused
from app.security import AuthenticationFailed, Principal
from app.security.api_keys import is_api_key
from app.security.stream_tickets import QUERY_PARAMETER as TICKET_PARAMETER

API_PREFIX = "/api/"
# What needs credentials: the API, the OpenAI-compatible endpoint and the A2A agents.
AUTHENTICATED_PREFIXES = (API_PREFIX, "/v1/", "/a2a/")
# Tokens of real identity providers stay far below this; a larger header is refused before
# it is parsed.
MAX_AUTHORIZATION_BYTES = 8192
PRINCIPAL_KEY = "principal"
TENANT_KEY = "tenant"
API_KEY_KEY = "api_key"
# The one route a stream ticket opens.
_TICKET_ROUTE = re.compile(r"/api/v1/tasks/([^/]+)/events")


class BearerAuthentication:
    """Verifies `Authorization: Bearer <JWT or API key>` and the caller's tenant, and leaves
    the `Principal`, its `Tenant` and (for a key) its `KeyGrant` in the request state; answers
    401 (403 for the tenant) problem+json itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(AUTHENTICATED_PREFIXES):
            await self.app(scope, receive, send)
            return
        state: AppState = scope["app"].state.omniforge
        grant: KeyGrant | None = None
        try:
            credential = await self._authenticate(state, scope)
            if isinstance(credential, KeyGrant):
                grant, principal = credential, credential.principal
            else:
                principal = credential
            tenant = await state.tenants.get(principal.tenant_id)
            if tenant is None or not tenant.is_active:
                raise TenantRefused(principal.tenant_id, disabled=tenant is not None)
        except (AuthenticationFailed, TenantRefused) as exc:
            await error_response(exc)(scope, receive, send)
            return
        request_state = scope.setdefault("state", {})
        request_state[PRINCIPAL_KEY] = principal
        request_state[TENANT_KEY] = tenant
        request_state[API_KEY_KEY] = grant
        with tenant_logged_as(principal.tenant_id):
            await self.app(scope, receive, send)

    @staticmethod
    async def _authenticate(state: AppState, scope: Scope) -> Principal | KeyGrant:
        header = next((value for name, value in scope["headers"] if name == b"authorization"), None)
        if header is not None and len(header) > MAX_AUTHORIZATION_BYTES:
            raise AuthenticationFailed(
                f"the Authorization header is longer than {MAX_AUTHORIZATION_BYTES} bytes"
            )
        if header is None and (ticket := _stream_ticket(scope)) is not None:
            principal = state.stream_tickets.verify(*ticket)
            if principal.api_key is not None:
                # Once per stream opened (a resume opens it again), not per event: a ticket
                # stops working the moment its key is revoked.
                await state.api_keys.check_usable(UUID(principal.api_key))
            return principal
        scheme, _, token = (header or b"").decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationFailed("a bearer token is required", token_given=False)
        token = token.strip()
        if is_api_key(token):
            return await state.api_keys.verify(token)
        return await state.verifier.verify(token)


def _stream_ticket(scope: Scope) -> tuple[str, UUID] | None:
    """The `?ticket=` of a `GET` of a task's stream, with the task's id: the one request a
    stream ticket authenticates (an `EventSource` cannot send a header). None elsewhere."""
    if scope["method"] != "GET" or (match := _TICKET_ROUTE.fullmatch(scope["path"])) is None:
        return None
    tickets = parse_qs(scope["query_string"].decode("latin-1")).get(TICKET_PARAMETER)
    if not tickets:
        return None
    try:
        task_id = UUID(match[1])
    except ValueError:
        raise AuthenticationFailed("the stream ticket is for another task") from None
    return tickets[0], task_id
