"""The service under test: the real app on a real uvicorn on 127.0.0.1, its database built by
the migrations, its models served by the fake LLM server."""

import base64
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from app.api import create_app
from app.api.serving import serve_locally as serve
from app.api.state import AppState
from app.config import Settings
from app.security import mint_token
from app.storage.tenants import TenantRepository
from tests.api.tools import BUILTIN_TOOLS, TEST_TOOLS
from tests.factories import fake_deployment, write_model_list
from tests.fakes.openai_server import FakeLLMServer

JWT_SECRET = "test-secret-" + "x" * 40
# One key for every service of a run, as instances of one deployment share theirs: any of them
# opens what another sealed (webhook secrets a delivery is signed with, tenant secrets).
SECRETS_KEY = base64.b64encode(b"k" * 32).decode()
MODEL = "fake-model"
# Prices (USD per token) of MODEL, as the model list states them.
INPUT_PRICE = "0.000001"
OUTPUT_PRICE = "0.000002"


def service_settings(
    directory: Path, database_url: str, fake_llm: FakeLLMServer, **overrides: Any
) -> Settings:
    models = write_model_list(
        directory,
        [
            fake_deployment(
                fake_llm,
                MODEL,
                input_cost=INPUT_PRICE,
                output_cost=OUTPUT_PRICE,
                native_tools=True,
            )
        ],
    )
    values: dict[str, Any] = {
        "env": "development",
        "data_dir": directory,
        "database_url": database_url,
        "jwt_secret": JWT_SECRET,
        "secrets_key": SECRETS_KEY,
        "models_file": models,
        "default_model": MODEL,
        "llm_max_attempts": 1,
        "shutdown_grace_s": 2.0,
        # The suite's workers share one Postgres (100 connections by default) among their
        # services and engines: each service opens at most 10.
        "database_pool_size": 5,
    }
    values.update(overrides)
    return Settings(**values)


@dataclass
class Service:
    """A running service and what tests need to talk to it."""

    base_url: str
    app: FastAPI
    settings: Settings
    fake_llm: FakeLLMServer

    @property
    def state(self) -> AppState:
        state: AppState = self.app.state.omniforge
        return state

    def token(
        self,
        tenant: str,
        sub: str = "alice",
        roles: Sequence[str] = ("member",),
        ttl: timedelta = timedelta(minutes=10),
    ) -> str:
        return mint_token(
            JWT_SECRET,
            tenant_id=tenant,
            subject=sub,
            roles=roles,
            ttl=ttl,
            issuer=self.settings.jwt_issuer,
            audience=self.settings.jwt_audience,
        )

    async def create_tenant(
        self, tenant_id: str, *, enabled_tools: Sequence[str] | None = tuple(BUILTIN_TOOLS)
    ) -> str:
        """A tenant of this service. By default its runs use the built-in tools only, so the
        tools registered for particular tests are offered only where those tests enable them."""
        async with self.state.database.transaction() as connection:
            await TenantRepository(connection).create(
                tenant_id,
                f"Tenant {tenant_id}",
                at=datetime.now(UTC),
                enabled_tools=None if enabled_tools is None else list(enabled_tools),
            )
        return tenant_id

    def client(self, tenant: str | None = None, **token: Any) -> httpx.AsyncClient:
        headers = {}
        if tenant is not None:
            headers["Authorization"] = f"Bearer {self.token(tenant, **token)}"
        return httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=30)


@asynccontextmanager
async def service_with_model(
    directory: Path, database_url: str, fake_llm: FakeLLMServer, deployment: dict[str, Any]
) -> AsyncIterator[Service]:
    """A service of its own whose model list holds MODEL and one more `deployment`."""
    (directory / "models").mkdir()
    models = write_model_list(
        directory / "models",
        [
            fake_deployment(
                fake_llm, MODEL, input_cost=INPUT_PRICE, output_cost=OUTPUT_PRICE, native_tools=True
            ),
            deployment,
        ],
    )
    settings = service_settings(directory, database_url, fake_llm, models_file=models)
    async with running_service(settings, fake_llm) as service:
        yield service


@asynccontextmanager
async def checked(service: Service) -> AsyncIterator[Service]:
    """`service` for one test; after it, no run may be left going and every scripted LLM
    reply must have been used."""
    yield service
    leftover = service.state.runs.active_runs
    await service.state.runs.shutdown(grace_s=5)
    fake = service.fake_llm
    try:
        assert leftover == 0, f"the test left {leftover} run(s) going"
        fake.verify()
    finally:
        fake.reset()


@asynccontextmanager
async def running_service(settings: Settings, fake_llm: FakeLLMServer) -> AsyncIterator[Service]:
    app = create_app(settings, tools=TEST_TOOLS)
    async with serve(app) as base_url:
        yield Service(base_url, app, settings, fake_llm)
