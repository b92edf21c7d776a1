"""Model governance through the running service: approved models with wildcards, a default
model, output caps; unapproved models refused at submission and never reached by a run, its
fallbacks included; `GET /api/v1/models` lists what the caller may use, with prices."""

from decimal import Decimal
from pathlib import Path
from uuid import uuid4

from tests.api.helpers import assert_problem, configure, stream, submit
from tests.factories import fake_deployment, write_model_list
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.service import (
    INPUT_PRICE,
    MODEL,
    OUTPUT_PRICE,
    Service,
    running_service,
    service_settings,
)


async def test_a_task_naming_an_unapproved_model_is_refused_with_what_is_approved(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "models", {"approved": ["fake-*"]})
    async with service.client(tenant) as client:
        response = await client.post("/api/v1/tasks", json={"input": "hi", "model": "demo"})
        listed = (await client.get("/api/v1/tasks")).json()

    body = assert_problem(response, 422, "model-not-approved")
    assert body["approved"] == [MODEL]
    assert body["errors"][0]["field"] == "body.model"
    assert "demo" in body["errors"][0]["message"]
    assert listed["items"] == []  # nothing was stored


async def test_the_policy_is_audited_and_read_back(service: Service, tenant: str) -> None:
    policy = {
        "approved": ["fake-*", "demo"],
        "default_model": "demo",
        "max_output_tokens": {},
        "complexity_assessment": "heuristic",
    }
    await configure(service, tenant, "models", policy)
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        read = (await admin.get(f"/api/v1/tenants/{tenant}/models")).json()
        audit = (await admin.get(f"/api/v1/tenants/{tenant}/audit?action=tenant.models.*")).json()

    assert read == policy
    [event] = audit["items"]
    assert event["actor"] == "root"
    assert event["details"]["before"] == {"models": {}}
    assert event["details"]["after"]["models"]["default_model"] == "demo"


async def test_the_default_model_and_the_output_cap_reach_the_call(
    service: Service, tenant: str
) -> None:
    await configure(
        service,
        tenant,
        "models",
        {"approved": [MODEL], "default_model": MODEL, "max_output_tokens": {"fake-*": 64}},
    )
    service.fake_llm.script(MODEL, Reply.text("ok"))
    async with service.client(tenant) as client:
        accepted = await submit(client)
        events = await stream(client, accepted["task_id"])
        task = (await client.get(f"/api/v1/tasks/{accepted['task_id']}")).json()

    assert events[-1].json["final_state"] == "completed"
    assert task["model"] == MODEL
    [request] = service.fake_llm.requests_for(MODEL)
    assert request.body["max_tokens"] == 64


async def test_invalid_policies_are_refused_field_by_field(service: Service, tenant: str) -> None:
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        unmatched = await admin.put(
            f"/api/v1/tenants/{tenant}/models",
            json={"approved": [MODEL, "gpt-9*"], "max_output_tokens": {"nope": 5}},
        )
        unapproved_default = await admin.put(
            f"/api/v1/tenants/{tenant}/models",
            json={"approved": [MODEL], "default_model": "demo"},
        )
        bad_cap = await admin.put(
            f"/api/v1/tenants/{tenant}/models", json={"max_output_tokens": {MODEL: 0}}
        )
        bad_assessment = await admin.put(
            f"/api/v1/tenants/{tenant}/models", json={"complexity_assessment": "guess"}
        )
        unchanged = (await admin.get(f"/api/v1/tenants/{tenant}/models")).json()

    body = assert_problem(unmatched, 422, "validation-error")
    assert {e["field"] for e in body["errors"]} == {
        "body.approved.1",
        "body.max_output_tokens.nope",
    }
    body = assert_problem(unapproved_default, 422, "validation-error")
    assert [e["field"] for e in body["errors"]] == ["body.default_model"]
    assert_problem(bad_cap, 422, "validation-error")
    body = assert_problem(bad_assessment, 422, "validation-error")
    assert [e["field"] for e in body["errors"]] == ["body.complexity_assessment"]
    assert unchanged == {
        "approved": None,
        "default_model": None,
        "max_output_tokens": {},
        "complexity_assessment": "model",
    }


async def test_the_model_list_shows_approved_models_with_their_prices(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as client:
        everything = (await client.get("/api/v1/models")).json()
    await configure(
        service, tenant, "models", {"approved": ["fake-*"], "max_output_tokens": {MODEL: 99}}
    )
    async with service.client(tenant, roles=("viewer",)) as client:
        approved = (await client.get("/api/v1/models")).json()

    assert {m["name"] for m in everything["items"]} == {MODEL, "demo"}
    [model] = approved["items"]
    assert model["name"] == MODEL
    assert model["default"] is True
    assert model["priced"] is True
    assert model["max_output_tokens"] == 99
    [deployment] = model["deployments"]
    assert Decimal(deployment["input_cost_per_token"]) == Decimal(INPUT_PRICE)
    assert Decimal(deployment["output_cost_per_token"]) == Decimal(OUTPUT_PRICE)


async def test_a_fallback_the_tenant_did_not_approve_is_never_reached(
    database_url: str, fake_llm: FakeLLMServer, service_dir: Path
) -> None:
    (service_dir / "models").mkdir()
    models = write_model_list(
        service_dir / "models",
        [
            fake_deployment(fake_llm, "primary", native_tools=True),
            fake_deployment(fake_llm, "backup", native_tools=True),
        ],
        fallbacks={"primary": ["backup"]},
    )
    settings = service_settings(
        service_dir, database_url, fake_llm, models_file=models, default_model="primary"
    )
    async with running_service(settings, fake_llm) as service:
        strict = await service.create_tenant(f"strict-{uuid4().hex[:8]}")
        open_ = await service.create_tenant(f"open-{uuid4().hex[:8]}")
        await configure(service, strict, "models", {"approved": ["primary"]})
        await configure(service, open_, "models", {"approved": ["primary", "backup"]})

        fake_llm.script("primary", Reply.error(500), Reply.error(500))
        fake_llm.script("backup", Reply.text("from the backup"))
        async with service.client(strict) as client:
            refused = await submit(client)
            refused_events = await stream(client, refused["task_id"])
        backup_calls_of_strict = len(fake_llm.requests_for("backup"))
        async with service.client(open_) as client:
            allowed = await submit(client)
            allowed_events = await stream(client, allowed["task_id"])

    assert backup_calls_of_strict == 0
    # the chain says the fallback was withheld, and why
    [result] = [
        e.json["step"]["tool_result"]
        for e in refused_events
        if e.event == "reasoning_step" and e.json["step"]["tool_result"]
    ]
    withheld = [a for a in result["failed_attempts"] if a["model"] == "backup"]
    assert [a["error_class"] for a in withheld] == ["model_not_approved"]
    failed = [e.json for e in refused_events if e.event == "chain_failed"]
    assert failed
    assert failed[0]["error_code"] == "llm_error"
    # the same fallback, approved, is used: the router's fallbacks work, the policy held them
    assert allowed_events[-1].json["final_state"] == "completed"
    assert len(fake_llm.requests_for("backup")) == 1
