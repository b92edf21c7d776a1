"""The app's routes, on its own router. FastAPI's `include_router` keeps each router as a
branch that a request is matched against in turn, and again inside the branch that takes it;
a route in a late branch, a path no route takes and a method no route of the path allows (a
405 names every method that is) paid for all 26 branches, the 405 about 3 ms of CPU. Each
route passes over a path that does not begin as its own does at once (`CheckedRoute`)."""

from fastapi import APIRouter, FastAPI


def add_routes(app: FastAPI, *routers: APIRouter) -> None:
    """Adds the routers' routes to the app, in order, as `include_router` would with no
    arguments. A router whose inclusion would change its routes (dependencies, start-up or
    shutdown handlers, a lifespan of its own) is refused: add that to the app instead."""
    default_lifespan = type(APIRouter().lifespan_context)
    for router in routers:
        own_lifespan = not isinstance(router.lifespan_context, default_lifespan)
        if router.dependencies or router.on_startup or router.on_shutdown or own_lifespan:
            raise ValueError(f"router {router.prefix or '/'} needs FastAPI's include_router")
        app.router.routes.extend(router.routes)
