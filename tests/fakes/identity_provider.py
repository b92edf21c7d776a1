"""An OpenID-style identity provider on 127.0.0.1 for the console's sign-in: an authorization
endpoint that signs the person in at once and sends the browser back with a code, a token
endpoint that gives an RS256 access token for that code only with the right PKCE verifier
(RFC 7636, S256), and its JWKS. It records what it was asked, for tests to check."""

import base64
import hashlib
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from tests.security.jwks_helpers import SigningKey


@dataclass
class Authorization:
    client_id: str
    redirect_uri: str
    challenge: str
    method: str
    scope: str


@dataclass
class FakeIdentityProvider:
    key: SigningKey
    issuer: str
    audience: str
    claims: dict[str, Any]
    origin: str = ""
    authorizations: list[Authorization] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    _codes: dict[str, Authorization] = field(default_factory=dict)

    @property
    def jwks_url(self) -> str:
        return f"{self.origin}/jwks"

    @property
    def authorization_url(self) -> str:
        return f"{self.origin}/authorize"

    @property
    def token_url(self) -> str:
        return f"{self.origin}/token"

    async def authorize(self, request: web.Request) -> web.Response:
        query = request.query
        if query.get("response_type") != "code" or "code_challenge" not in query:
            return web.json_response({"error": "invalid_request"}, status=400)
        grant = Authorization(
            query["client_id"],
            query["redirect_uri"],
            query["code_challenge"],
            query.get("code_challenge_method", "plain"),
            query.get("scope", ""),
        )
        self.authorizations.append(grant)
        code = secrets.token_urlsafe(16)
        self._codes[code] = grant
        back = urlencode({"code": code, "state": query.get("state", "")})
        raise web.HTTPFound(f"{grant.redirect_uri}?{back}")

    async def token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        self.token_requests.append({k: str(v) for k, v in form.items()})
        cors = {"Access-Control-Allow-Origin": request.headers.get("Origin", "*")}
        grant = self._codes.pop(str(form.get("code", "")), None)
        verifier = str(form.get("code_verifier", ""))
        digest = hashlib.sha256(verifier.encode()).digest()
        challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        if (
            grant is None
            or grant.method != "S256"
            or challenge != grant.challenge
            or form.get("redirect_uri") != grant.redirect_uri
            or form.get("client_id") != grant.client_id
        ):
            return web.json_response({"error": "invalid_grant"}, status=400, headers=cors)
        now = datetime.now(UTC)
        claims = {
            "iss": self.issuer,
            "aud": self.audience,
            "iat": now,
            "exp": now + timedelta(minutes=5),
            **self.claims,
        }
        body = {"access_token": self.key.sign(claims), "token_type": "Bearer", "expires_in": 300}
        return web.json_response(body, headers=cors)

    async def jwks(self, request: web.Request) -> web.Response:
        return web.json_response({"keys": [self.key.jwk()]})


@asynccontextmanager
async def identity_provider(
    key: SigningKey, *, issuer: str, audience: str, claims: dict[str, Any]
) -> AsyncIterator[FakeIdentityProvider]:
    provider = FakeIdentityProvider(key, issuer, audience, claims)
    app = web.Application()
    app.router.add_get("/authorize", provider.authorize)
    app.router.add_post("/token", provider.token)
    app.router.add_get("/jwks", provider.jwks)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    provider.origin = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield provider
    finally:
        await runner.cleanup()
