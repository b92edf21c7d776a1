"""A tenant's API keys: stored as the digest of their secrets (`store`), created and revoked
on behalf of its admins with their audit (`service`). Requests are authenticated with them
through `app.governance.api_keys`."""

from app.resources.api_keys.service import ApiKeyService, RolesExceedCreator

__all__ = ["ApiKeyService", "RolesExceedCreator"]
