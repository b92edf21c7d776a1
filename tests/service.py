"""The service under test: the real app on a real uvicorn on 127.0.0.1, its database built by
the migrations, its models served by the fake LLM server."""

import asyncio
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from app.api import create_app
from app.api.state import AppState
from app.config import Settings
from app.security import mint_token
from app.storage.tenants import TenantRepository
from tests.api.tools import BUILTIN_TOOLS, TEST_TOOLS
from tests.factories import fake_deployment, write_model_list
from tests.fakes.openai_server import FakeLLMServer

JWT_SECRET = "test-secret-" + "x" * 40
MODEL = "fake-model"
# Prices (USD per token) of MODEL, as the model list states them.
INPUT_PRICE = "0.000001"
OUTPUT_PRICE = "0.000002"


class _Server(uvicorn.Server):
    """uvicorn that says when it is serving, instead of being polled."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


@asynccontextmanager
async def serve(app: FastAPI) -> AsyncIterator[str]:
    """Serves `app` on a free port of 127.0.0.1 until the block ends; yields its base URL."""
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that name TCP; without it
    # Nagle and delayed ACKs hold every small response back by some 40 ms.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    port = sock.getsockname()[1]
    server = _Server(
        uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2, backlog=2048
        )
    )
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    ready = asyncio.create_task(server.ready.wait())
    await asyncio.wait([serving, ready], return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        ready.cancel()
        await serving
        raise RuntimeError("the service did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving
        sock.close()


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
        "models_file": models,
        "default_model": MODEL,
        "llm_max_attempts": 1,
        "shutdown_grace_s": 2.0,
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
        return mint_token(JWT_SECRET, tenant_id=tenant, subject=sub, roles=roles, ttl=ttl)

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
            fake_deployment(fake_llm, MODEL, input_cost=INPUT_PRICE, output_cost=OUTPUT_PRICE),
            deployment,
        ],
    )
    settings = service_settings(directory, database_url, fake_llm, models_file=models)
    async with running_service(settings, fake_llm) as service:
        yield service


@asynccontextmanager
async def running_service(settings: Settings, fake_llm: FakeLLMServer) -> AsyncIterator[Service]:
    app = create_app(settings, tools=TEST_TOOLS)
    async with serve(app) as base_url:
        yield Service(base_url, app, settings, fake_llm)
