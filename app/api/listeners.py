"""`omniforge serve`'s HTTP listeners: the API's port and, with `OMNIFORGE_METRICS_PORT`, a
second port for `/metrics` in the same process (one app, one event loop, one set of metrics)."""

import contextlib
import sys
from typing import Any

import uvicorn
from fastapi import FastAPI, Request

from app.api.deps import State
from app.api.errors import NOT_FOUND, ApiError
from app.api.serving import KEEP_ALIVE_S, DrainingServer, listeners_of
from app.observability.json_logs import uvicorn_log_config

_STARTUP_FAILURE = 3  # uvicorn's own exit status for it


def serve(app: FastAPI, *, host: str, port: int, metrics_port: int | None, grace_s: float) -> None:
    """Serves `app` until SIGINT/SIGTERM; on either, the runs drain and requests finish within
    `grace_s` (see `DrainingServer`) before the process exits."""
    options: dict[str, Any] = {
        "timeout_graceful_shutdown": grace_s,
        "timeout_keep_alive": KEEP_ALIVE_S,
        "log_level": "info",
        "log_config": uvicorn_log_config(app.state.settings.log_format),
    }
    config = uvicorn.Config(app, host=host, port=port, **options)
    server = DrainingServer(config, app, grace_s=grace_s)
    # Bound here, before the app starts, so that it knows the ports it listens on (its SSRF
    # guard refuses them) whatever port was asked for (0 included).
    sockets = [config.bind_socket()]
    if metrics_port is not None:
        # One server on both sockets: a shutdown closes both, and `/metrics` reads this
        # process's counters whichever socket it arrives on. A second Config only binds the
        # second socket the way uvicorn binds the first (address family, address reuse, the
        # "running on" line).
        metrics = uvicorn.Config(app, host=host, port=metrics_port, **options)
        sockets.append(metrics.bind_socket())
    for sock in sockets:
        listeners_of(app).add(sock.getsockname()[1])
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=sockets)
    if not server.started:
        # As `uvicorn.run` does: a server that never started (its log says why) is a failure.
        sys.exit(_STARTUP_FAILURE)


def arrived_on_port(request: Request) -> int | None:
    """The port of this server the request arrived on."""
    server = request.scope.get("server")
    return int(server[1]) if server and server[1] is not None else None


def refuse_off_metrics_port(request: Request, state: State) -> None:
    """With a metrics port set, `/metrics` exists on it alone: on the API's port it is not
    found, as if there were no such route."""
    metrics_port = state.settings.metrics_port
    if metrics_port is not None and arrived_on_port(request) != metrics_port:
        raise ApiError(NOT_FOUND, f"No route {request.url.path}.")
