"""Persistence: the async engine, the tables (built only by Alembic migrations) and the
tenant-scoped repositories."""

from app.storage.database import Database
from app.storage.migrate import current_revision, head_revision, upgrade_to_head

__all__ = ["Database", "current_revision", "head_revision", "upgrade_to_head"]
