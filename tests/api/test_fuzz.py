"""A bounded property-based fuzz of our own OpenAPI document (Schemathesis), against the
running service on Postgres, as a tenant admin, a platform admin and a member: valid and
invalid requests to every operation must never answer 5xx, and every answer must be one the
document lists, with its content type and schema.

Every phase runs: the document's examples (Hypothesis' explicit phase), the coverage cases,
generated cases (valid and invalid) per operation, and stateful sequences that follow the
links Schemathesis infers between operations (an id one answer gives is used by the next
request), as each role.

It runs derandomized (the same cases each run) so that a failure reproduces; what it found
is printed with a curl command per case. The operations are split between the suite's
workers (`SHARDS` tests): each case is made once and sent as every role, and each shard runs
one role's stateful sequences.
"""

import asyncio
import contextlib
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
from hypothesis.errors import Flaky
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Err
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
# Tests the operations are split between, each run by a worker of its own; shard `n` also
# runs the stateful sequences as `ROLES[n]`.
SHARDS = len(ROLES)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
# Generated cases per operation and mode (valid, invalid), besides its coverage cases.
EXAMPLES = 5
# Stateful scenarios per role, and the most steps (requests) each takes.
SCENARIOS = 25
STEPS = 12
# Operations that change a tenant's own settings or status are sent to a tenant of their own,
# so that the others keep being exercised on a tenant that still takes tasks.
SETTINGS_METHODS = {"PUT", "PATCH"}


class _Fuzzer:
    """Sends every operation's cases, as each role; keeps a report of each distinct failure."""

    def __init__(self, base_url: str, tokens: dict[str, str]) -> None:
        self.base_url = base_url
        self.tokens = tokens
        self.session = requests.Session()
        # No proxies, netrc or CA bundle from the environment: requests looks them up again
        # for every request (a tenth of the fuzzer's CPU), and the service is on 127.0.0.1.
        self.session.trust_env = False
        self.sent = 0
        self.failures: dict[tuple[str, str], str] = {}

    def operation(self, schema: Any, operation: Any, path_parameters: dict[str, str]) -> None:
        """The operation's cases, each made once and sent as every role."""
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
            self._send_as_every_role(operation.label, case)
        for mode in modes:
            strategy = operation.as_strategy(
                generation_mode=mode, path_parameters=path_parameters or None
            )
            self._cases(operation.label, strategy)

    def _send_as_every_role(self, label: str, case: Any) -> None:
        for role, token in self.tokens.items():
            self._send(label, case, role, {"Authorization": f"Bearer {token}"})

    def _send(self, label: str, case: Any, role: str, headers: dict[str, str]) -> None:
        response = case.call(
            base_url=self.base_url, headers=headers, session=self.session, timeout=30
        )
        self.check(label, case, role, headers, response)

    def check(
        self, label: str, case: Any, role: str, headers: dict[str, str], response: Any
    ) -> None:
        """Records what `response` to `case` breaks, if anything (never raises)."""
        self.sent += 1
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except FailureGroup as found:  # every failure is reported, none stops the run
            kinds = sorted(f"{failure.code} {failure.title}" for failure in found.exceptions)
            key = (label, ", ".join(kinds))
            if key not in self.failures:
                curl = case.as_curl_command(headers=headers)
                self.failures[key] = f"{label} as {role}: {key[1]}\n{found}\n{curl[:2000]}"

    def _cases(self, label: str, strategy: Any) -> None:
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy)
        def check(case: schemathesis.Case[Any]) -> None:
            self._send_as_every_role(label, case)

        try:
            check()
        except Exception as unsatisfiable:  # an operation that takes no input at all
            if "Unable to satisfy" not in str(unsatisfiable):
                raise


def _known_ids(method: str, path: str, ids: dict[str, str], settings_tenant: str) -> dict[str, str]:
    """The real ids an operation's path takes (a settings change goes to a tenant of its own)."""
    changes_settings = method.upper() in SETTINGS_METHODS
    return {
        name: settings_tenant if name == "tenant_id" and changes_settings else value
        for name, value in ids.items()
        if f"{{{name}}}" in path
    }


def _fuzz(
    base_url: str, tokens: dict[str, str], ids: dict[str, str], settings_tenant: str, shard: int
) -> tuple[int, int, list[str]]:
    """The shard's operations of the document, fuzzed as every role, then stateful sequences
    as the shard's role; returns how many requests were sent, how many of them in sequences,
    and the failures found."""
    schema = schemathesis.openapi.from_dict(json.loads(DOCUMENT.read_text(encoding="utf-8")))
    fuzzer = _Fuzzer(base_url, tokens)
    for result in list(schema.get_all_operations())[shard::SHARDS]:
        if isinstance(result, Err):
            raise result.err()
        operation = result.ok()
        fuzzer.operation(
            schema, operation, _known_ids(operation.method, operation.path, ids, settings_tenant)
        )
    alone = fuzzer.sent
    role = ROLES[shard]
    _sequences(schema, fuzzer, role, tokens[role], ids, settings_tenant)
    return fuzzer.sent, fuzzer.sent - alone, list(fuzzer.failures.values())


def _sequences(
    schema: Any, fuzzer: _Fuzzer, role: str, token: str, ids: dict[str, str], settings_tenant: str
) -> None:
    """Stateful sequences as `role`: each step's request may take what an earlier answer gave
    (the links Schemathesis infers between the operations); the tenant in a path is the
    role's own."""
    machine = schema.as_state_machine()

    class AsRole(machine):  # type: ignore[misc, valid-type]
        ROLE = role
        TOKEN = token

        @property
        def headers(self) -> dict[str, str]:
            return {"Authorization": f"Bearer {self.TOKEN}"}

        def before_call(self, case: Any) -> None:
            known = _known_ids(case.method, case.path, ids, settings_tenant)
            if "tenant_id" in known:
                case.path_parameters = {
                    **(case.path_parameters or {}),
                    "tenant_id": known["tenant_id"],
                }

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {
                "base_url": fuzzer.base_url,
                "headers": self.headers,
                "session": fuzzer.session,
                "timeout": 30,
            }

        def validate_response(self, response: Any, case: Any, *_: Any, **__: Any) -> None:
            label = f"{case.operation.label} (stateful)"
            fuzzer.check(label, case, self.ROLE, self.headers, response)

    # A sequence Hypothesis draws differently on a second run (an id an answer gave is
    # gone) is the live service's doing: the suite ends there, as in Schemathesis' own
    # runner. What was sent was checked.
    with contextlib.suppress(Flaky):
        AsRole.run(
            settings=settings(
                max_examples=SCENARIOS,
                stateful_step_count=STEPS,
                deadline=None,
                database=None,
                derandomize=True,
                # Generation only: a replay of a sequence against a live service meets
                # the state the first run left, not the one it met.
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
        )


# One test per shard of the operations, so that the suite's workers share them.
@pytest.mark.parametrize("shard", range(SHARDS))
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_no_request_to_the_documented_api_gets_a_5xx_or_an_undocumented_answer(
    shard: int, database_url: str, fake_llm: FakeLLMServer, service_dir: Path
) -> None:
    # Most fuzzed requests are invalid: the tenant's client-error limit would soon refuse
    # them all (429) before they reach what they probe.
    settings_ = service_settings(
        service_dir, database_url, fake_llm, default_model="demo", client_errors_per_minute=None
    )
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
            sent, in_sequences, failures = await asyncio.get_running_loop().run_in_executor(
                fuzzing,
                _fuzz,
                service.base_url,
                tokens,
                {**ids, "tenant_id": tenant},
                settings_tenant,
                shard,
            )
        elapsed = time.monotonic() - started

    print(f"fuzz: {sent} requests ({in_sequences} in stateful sequences) in {elapsed:.1f} s")
    for failure in failures:
        print("FOUND", failure.splitlines()[0])
    assert sent > 1000
    assert in_sequences > 100
    assert not failures, "\n\n".join(failures)


async def _a_finished_task(service: Service, tenant: str) -> dict[str, Any]:
    """Real ids for the operations that take a task or a chain."""
    async with service.client(tenant) as client:
        task = await submit(client, input="What is 17 * 23 + 4?", model="demo")
        await stream(client, task["task_id"])
    return {"task_id": task["task_id"], "chain_id": task["chain_id"]}
