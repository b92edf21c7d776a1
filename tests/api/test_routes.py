"""The app's routes sit on its own router (`add_routes`), as `include_router` would put them."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from fastapi import APIRouter, Depends, FastAPI

from app.api.routes import add_routes


def _noop() -> None:
    return None


@asynccontextmanager
async def _lifespan(_app: FastAPI) -> AsyncIterator[None]:
    yield


def test_the_routes_are_added_in_order_and_answer_as_their_routers_declare() -> None:
    first, second = APIRouter(prefix="/a"), APIRouter(prefix="/b")
    first.add_api_route("/x", _noop)
    second.add_api_route("/y", _noop, methods=["POST"])
    app = FastAPI()
    before = len(app.router.routes)

    add_routes(app, first, second)

    added = app.router.routes[before:]
    assert [(route.path, sorted(route.methods)) for route in added] == [  # type: ignore[attr-defined]
        ("/a/x", ["GET"]),
        ("/b/y", ["POST"]),
    ]


@pytest.mark.parametrize(
    "router",
    [
        APIRouter(dependencies=[Depends(_noop)]),
        APIRouter(lifespan=_lifespan),
        APIRouter(on_startup=[_noop]),
    ],
    ids=["dependencies", "lifespan", "start-up handler"],
)
def test_a_router_whose_inclusion_would_change_its_routes_is_refused(router: APIRouter) -> None:
    router.add_api_route("/x", _noop)

    with pytest.raises(ValueError, match="include_router"):
        add_routes(FastAPI(), router)
