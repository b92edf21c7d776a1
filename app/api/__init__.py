"""The HTTP API: app factory, dependencies, error mapping and routers."""

from app.api.app import create_app

__all__ = ["create_app"]
