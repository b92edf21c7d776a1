"""A2A v1.0 server: each agent of a tenant served to A2A clients (its card, the JSON-RPC and
HTTP+JSON bindings) over our tasks, with the usage-and-resume extension."""
