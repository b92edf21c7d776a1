"""A bounded property-based fuzz of our own OpenAPI document (Schemathesis), against the
running service on Postgres, as a tenant admin, a platform admin and a member: valid and
invalid requests to every operation must never answer 5xx, and every answer must be one the
document lists, with its content type and schema.

It runs derandomized (the same cases each run) so that a failure reproduces; what it found
is printed with a curl command per case.
"""

import asyncio
import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.helpers import configure, stream, submit
from tests.fakes.openai_server import FakeLLMServer
from tests.service import Service, running_service, service_settings

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
ROLES = ("tenant_admin", "platform_admin", "member")
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
EXAMPLES = 8
# Operations that change a tenant's own settings or status are sent to a tenant of their own,
# so that the others keep being exercised on a tenant that still takes tasks.
SETTINGS_METHODS = {"PUT", "PATCH"}


class _Fuzzer:
    """Sends every operation's cases, as each role; keeps a report of each distinct failure."""

    def __init__(self, base_url: str, tokens: dict[str, str]) -> None:
        self.base_url = base_url
        self.tokens = tokens
        self.session = requests.Session()
        self.sent = 0
        self.failures: dict[tuple[str, str], str] = {}

    def operation(self, schema: Any, operation: Any, path_parameters: dict[str, str]) -> None:
        modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
        # The coverage cases: each input at its bounds and just past them, each type swapped
        # for others (`0.5` for a time, `""` for an id...), fixed by the document.
        coverage = list(
            schema.iter_coverage_cases(
                operation,
                generation_modes=modes,
                generation_config=schema.config.generation_for(operation=operation),
            )
        )
        for case in coverage:
            case.path_parameters = {**(case.path_parameters or {}), **path_parameters}
        for role, token in self.tokens.items():
            headers = {"Authorization": f"Bearer {token}"}
            for case in coverage:
                self._send(operation.label, case, role, headers)
            for mode in modes:
                strategy = operation.as_strategy(
                    generation_mode=mode, path_parameters=path_parameters or None
                )
                self._cases(operation.label, strategy, role, headers)

    def _send(self, label: str, case: Any, role: str, headers: dict[str, str]) -> None:
        self.sent += 1
        response = case.call(
            base_url=self.base_url, headers=headers, session=self.session, timeout=30
        )
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except FailureGroup as found:  # every failure is reported, none stops the run
            kinds = sorted(f"{failure.code} {failure.title}" for failure in found.exceptions)
            key = (label, ", ".join(kinds))
            if key not in self.failures:
                curl = case.as_curl_command(headers=headers)
                self.failures[key] = f"{label} as {role}: {key[1]}\n{found}\n{curl[:2000]}"

    def _cases(self, label: str, strategy: Any, role: str, headers: dict[str, str]) -> None:
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy)
        def check(case: schemathesis.Case) -> None:
            self._send(label, case, role, headers)

        try:
            check()
        except Exception as unsatisfiable:  # an operation that takes no input at all
            if "Unable to satisfy" not in str(unsatisfiable):
                raise


def _fuzz(
    base_url: str, tokens: dict[str, str], ids: dict[str, str], settings_tenant: str
) -> tuple[int, list[str]]:
    """Every operation of the document, fuzzed; returns how many requests were sent and the
    failures found."""
    schema = schemathesis.openapi.from_dict(json.loads(DOCUMENT.read_text(encoding="utf-8")))
    fuzzer = _Fuzzer(base_url, tokens)
    for result in schema.get_all_operations():
        operation = result.ok()
        changes_settings = operation.method.upper() in SETTINGS_METHODS
        fuzzer.operation(
            schema,
            operation,
            {
                name: settings_tenant if name == "tenant_id" and changes_settings else value
                for name, value in ids.items()
                if f"{{{name}}}" in operation.path
            },
        )
    return fuzzer.sent, list(fuzzer.failures.values())


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_no_request_to_the_documented_api_gets_a_5xx_or_an_undocumented_answer(
    database_url: str, fake_llm: FakeLLMServer, service_dir: Path
) -> None:
    settings_ = service_settings(service_dir, database_url, fake_llm, default_model="demo")
    async with running_service(settings_, fake_llm) as service:
        tenant = await service.create_tenant(f"fuzz-{uuid4().hex[:8]}")
        settings_tenant = await service.create_tenant(f"fuzz-settings-{uuid4().hex[:8]}")
        # The fuzzed tenant's tasks run on the offline demo model, whatever they name.
        await configure(service, tenant, "models", {"approved": ["demo"], "default_model": "demo"})
        ids = await _a_finished_task(service, tenant)
        tokens = {role: service.token(tenant, sub=f"fuzz-{role}", roles=(role,)) for role in ROLES}
        started = time.monotonic()
        # In a process of its own: CPython 3.11.7 keeps the AST parser's recursion count per
        # interpreter, so Hypothesis parsing lambdas in one thread while the service formats a
        # traceback in another can fail with "AST constructor recursion depth mismatch".
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as fuzzing:
            sent, failures = await asyncio.get_running_loop().run_in_executor(
                fuzzing,
                _fuzz,
                service.base_url,
                tokens,
                {**ids, "tenant_id": tenant},
                settings_tenant,
            )
        elapsed = time.monotonic() - started

    print(f"fuzz: {sent} requests in {elapsed:.1f} s")
    for failure in failures:
        print("FOUND", failure.splitlines()[0])
    assert sent > 1000
    assert not failures, "\n\n".join(failures)


async def _a_finished_task(service: Service, tenant: str) -> dict[str, Any]:
    """Real ids for the operations that take a task or a chain."""
    async with service.client(tenant) as client:
        task = await submit(client, input="What is 17 * 23 + 4?", model="demo")
        await stream(client, task["task_id"])
    return {"task_id": task["task_id"], "chain_id": task["chain_id"]}
