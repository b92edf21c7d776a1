"""The client's tests run against the real service, as the service's own tests start it: a
real uvicorn on 127.0.0.1, a database built by the migrations on SQLite and on Postgres, and
the scripted fake LLM server."""

from tests.conftest import (  # noqa: F401  (fixtures and the hook, shared with tests/)
    database_url,
    other_tenant,
    pytest_configure,
    running,
    service,
    shared_fake_llm,
    tenant,
)
