"""One tenant's unstorable data never stalls another tenant: while an attacker's requests
carry U+0000 and lone surrogates (in token claims, task input, and its model's replies), a
bystander's task goes from submission to `done` within twice its time alone."""

import asyncio
import statistics
import time

import httpx
import jwt

from tests.api.helpers import submit
from tests.fakes.openai_server import Reply
from tests.service import JWT_SECRET, MODEL, Service
from tests.sse import collect

ROUNDS = 9
STALLED_S = 120
EVIL_REPLY = "four\x00 or \ud800five"


async def _submit_to_done(client: httpx.AsyncClient) -> float:
    """Seconds from submitting a task on the offline demo model to its `done`."""
    started = time.perf_counter()
    async with client.stream(
        "POST",
        "/api/v1/tasks",
        json={"input": "What is 17 * 23 + 4?", "model": "demo"},
        headers={"Accept": "text/event-stream"},
    ) as response:
        events = await collect(response)
    elapsed = time.perf_counter() - started
    assert events[-1].event == "done"
    assert events[-1].json["final_state"] == "completed"
    return elapsed


async def _until_done(client: httpx.AsyncClient, task_id: str) -> None:
    """Reads the task's stream to its end (204 once it is over and stored)."""
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
        assert response.status_code in (200, 204)
        await response.aread()


async def test_a_tenants_unstorable_data_does_not_slow_another_tenants_tasks(
    service: Service, tenant: str, other_tenant: str
) -> None:
    bystander = service.client(other_tenant, sub="bob")
    attacker = service.client(tenant, sub="mallory")
    forged = jwt.encode(
        {"sub": "mallory\x00", "tenant_id": tenant, "roles": ["member"], "exp": 2**40},
        JWT_SECRET,
        algorithm="HS256",
    )
    forged_client = httpx.AsyncClient(
        base_url=service.base_url, headers={"Authorization": f"Bearer {forged}"}
    )
    service.fake_llm.script(MODEL, *[Reply.text(EVIL_REPLY) for _ in range(ROUNDS + 1)])
    # A task left unfinished leaves its stream open: fail then, rather than hang.
    async with asyncio.timeout(STALLED_S), bystander, attacker, forged_client:
        await _submit_to_done(bystander)  # warm: the first task pays one-off costs
        target = (await submit(attacker, input="anything"))["task_id"]
        await _until_done(attacker, target)
        alone: list[float] = []
        attacked: list[float] = []
        refusals: list[int] = []
        evil_tasks: list[str] = []
        for _ in range(ROUNDS):
            # Rounds alone and under attack alternate, so that whatever else the machine does
            # meanwhile weighs on both alike. A round alone starts once the attack before it
            # is over.
            alone.append(await _submit_to_done(bystander))
            # While the bystander's task runs: a task whose model replies with NUL and a lone
            # surrogate, a stream opened with a NUL in the token's `sub`, and a task whose
            # input holds a NUL.
            evil_tasks.append((await submit(attacker, input="2 + 2?"))["task_id"])
            stream_open = asyncio.ensure_future(forged_client.get(f"/api/v1/tasks/{target}/events"))
            bad_input = asyncio.ensure_future(
                attacker.post(
                    "/api/v1/tasks",
                    content=b'{"input": "a\\u0000b"}',
                    headers={"Content-Type": "application/json"},
                )
            )
            attacked.append(await _submit_to_done(bystander))
            refusals += [(await stream_open).status_code, (await bad_input).status_code]
            await _until_done(attacker, evil_tasks[-1])
        finished = [(await attacker.get(f"/api/v1/tasks/{t}")).json() for t in evil_tasks]

    assert refusals == [401, 422] * ROUNDS
    baseline, under_attack = statistics.median(alone), statistics.median(attacked)
    assert under_attack <= 2 * baseline, (baseline, under_attack)
    # The attacker's own tasks were stored and finished too, not lost.
    assert {task["status"] for task in finished} == {"completed"}
    assert {task["result"] for task in finished} == {"four\u2400 or \ufffdfive"}
