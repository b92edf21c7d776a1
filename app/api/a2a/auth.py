"""Bearer authentication for the A2A routes, exactly as `BearerAuthentication` does it for
`/api/` and `/v1/`: the same credentials (JWT or API key), the same tenant check, the same
401 / 403 problems, and the same request state for the `Require…` aliases to read.

`/a2a/` is not among the middleware's prefixes, so this router dependency runs it for the
A2A routes; it does nothing where the middleware already has (should the prefix be added
there, this dependency can go)."""

from fastapi import Depends, Request

from app.api.auth import API_KEY_KEY, PRINCIPAL_KEY, TENANT_KEY, BearerAuthentication
from app.api.deps import State
from app.governance.api_keys import KeyGrant
from app.runs.errors import TenantRefused


async def _authenticated(request: Request, state: State) -> None:
    request_state = request.scope.setdefault("state", {})
    if PRINCIPAL_KEY in request_state:
        return
    credential = await BearerAuthentication._authenticate(state, request.scope)
    grant = credential if isinstance(credential, KeyGrant) else None
    principal = credential.principal if isinstance(credential, KeyGrant) else credential
    tenant = await state.tenants.get(principal.tenant_id)
    if tenant is None or not tenant.is_active:
        raise TenantRefused(principal.tenant_id, disabled=tenant is not None)
    request_state[PRINCIPAL_KEY] = principal
    request_state[TENANT_KEY] = tenant
    request_state[API_KEY_KEY] = grant


AUTHENTICATED = Depends(_authenticated)
"""For `APIRouter(dependencies=[...])`: before every other dependency of its routes."""
