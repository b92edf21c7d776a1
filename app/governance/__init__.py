"""Tenant settings and the audit trail: what bounds and records what callers and runs do."""
