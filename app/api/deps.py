"""The `Annotated` dependencies routes declare: who calls, and what they touch."""

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncConnection

from app.api.auth import PRINCIPAL_KEY
from app.api.state import AppState
from app.security import AuthenticationFailed, Principal

_bearer = HTTPBearer(auto_error=False, description="A JWT with `sub`, `tenant_id` and `roles`.")


async def _state(request: Request) -> AppState:
    state: AppState = request.app.state.omniforge
    return state


State = Annotated[AppState, Depends(_state)]


async def _principal(
    request: Request,
    # Documents the scheme in OpenAPI; `BearerAuthentication` has verified the token already.
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    principal = getattr(request.state, PRINCIPAL_KEY, None)
    if not isinstance(principal, Principal):
        raise AuthenticationFailed("a bearer token is required", token_given=False)
    return principal


CurrentPrincipal = Annotated[Principal, Depends(_principal)]


async def _read_connection(state: State) -> AsyncIterator[AsyncConnection]:
    async with state.database.read() as connection:
        yield connection


ReadConnection = Annotated[AsyncConnection, Depends(_read_connection)]
