"""Tenants and their settings (visibility, tools, network allow-lists, approvals, quotas,
model policy, retention), changed on behalf of admins with their audit (`service`). The rows
are kept by `app.storage.tenants`; requests and runs read them through
`app.governance.tenants`."""

from app.resources.tenants.service import InvalidSettings, TenantService

__all__ = ["InvalidSettings", "TenantService"]
