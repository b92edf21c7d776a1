"""Programs that run inside a sandbox, on the system's Python (standard library only)."""
