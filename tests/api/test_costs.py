"""Usage and cost reports through the running service: every figure equals the sum of the
records it covers, computed here by hand from the scripted usage and the registered prices;
CSV says what JSON says; the daily roll-up adds up under concurrent writers."""

import asyncio
import csv
import io
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx

from app.api.costs.schemas import FIGURES, to_csv
from tests.api.helpers import assert_problem, define_agent, stream, submit
from tests.factories import fake_deployment, write_model_list
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import Service, running_service, service_settings

PRICES = {
    "alpha": (Decimal("0.000001"), Decimal("0.000002")),
    "beta": (Decimal("0.000003"), Decimal("0.0000045")),
}


@dataclass(frozen=True)
class Call:
    user: str
    task: int
    model: str
    tool: str
    input_tokens: int
    output_tokens: int

    @property
    def cost(self) -> Decimal | None:
        if self.model not in PRICES:
            return None
        price_in, price_out = PRICES[self.model]
        return price_in * self.input_tokens + price_out * self.output_tokens


def _figures(calls: list[Call]) -> dict[str, Any]:
    return {
        "calls": len(calls),
        "input_tokens": sum(c.input_tokens for c in calls),
        "output_tokens": sum(c.output_tokens for c in calls),
        "cost_usd": sum((c.cost or Decimal(0) for c in calls), Decimal(0)),
        "unpriced_calls": sum(1 for c in calls if c.cost is None),
        "sandbox_s": Decimal(0),  # no sandbox calls here (tests/api/test_sandbox_metering.py)
    }


def _parsed(figures: dict[str, Any]) -> dict[str, Any]:
    return {
        **figures,
        "cost_usd": Decimal(figures["cost_usd"]),
        "sandbox_s": Decimal(figures["sandbox_s"]),
    }


def _grouped(calls: list[Call], key: Callable[[Call], str | None]) -> dict[str | None, Any]:
    groups: dict[str | None, list[Call]] = {}
    for call in calls:
        groups.setdefault(key(call), []).append(call)
    return {name: _figures(members) for name, members in groups.items()}


async def _run(
    client: httpx.AsyncClient,
    fake: FakeLLMServer,
    model: str,
    usage: list[tuple[int, int]],
    agent: str | None = None,
) -> str:
    """A task on `model` (through `agent`, whose model it is, if given) whose LLM calls report
    `usage` in turn: a calculator call per pair but the last, which answers."""
    replies = [
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "1 + 2"})],
            prompt_tokens=prompt,
            completion_tokens=completion,
        )
        for prompt, completion in usage[:-1]
    ]
    prompt, completion = usage[-1]
    replies.append(Reply.text("3", prompt_tokens=prompt, completion_tokens=completion))
    fake.script(model, *replies)
    accepted = await (submit(client, agent=agent) if agent else submit(client, model=model))
    events = await stream(client, accepted["task_id"])
    assert events[-1].json["final_state"] == "completed"
    return str(accepted["task_id"])


def _priced_models(fake_llm: FakeLLMServer, directory: Path) -> Path:
    (directory / "models").mkdir()
    return write_model_list(
        directory / "models",
        [
            fake_deployment(
                fake_llm, name, input_cost=str(p_in), output_cost=str(p_out), native_tools=True
            )
            for name, (p_in, p_out) in PRICES.items()
        ]
        + [fake_deployment(fake_llm, "gamma", native_tools=True)],  # no price
    )


async def test_every_report_figure_is_the_sum_of_its_records(
    database_url: str, fake_llm: FakeLLMServer, service_dir: Path
) -> None:
    models = _priced_models(fake_llm, service_dir)
    settings = service_settings(
        service_dir, database_url, fake_llm, models_file=models, default_model="alpha"
    )
    plan = [
        ("alice", "alpha", [(100, 20), (150, 25), (200, 30)]),
        ("bob", "beta", [(300, 40)]),
        ("alice", "gamma", [(50, 5), (60, 6)]),
        ("bob", "alpha", [(1234, 567)]),
    ]
    async with running_service(settings, fake_llm) as service:
        tenant = await service.create_tenant(f"c-{uuid4().hex[:12]}")
        calls: list[Call] = []
        task_ids: list[str] = []
        for index, (user, model, usage) in enumerate(plan):
            async with service.client(tenant, sub=user) as client:
                task_ids.append(await _run(client, fake_llm, model, usage))
            calls += [Call(user, index, model, "llm", p, c) for p, c in usage]
        async with service.client(tenant, sub="ada", roles=("auditor",)) as auditor:
            reports = {
                group_by: (
                    await auditor.get(
                        f"/api/v1/tenants/{tenant}/costs", params={"group_by": group_by}
                    )
                ).json()
                for group_by in ("model", "day", "tool", "task", "user")
            }
            plain = (await auditor.get(f"/api/v1/tenants/{tenant}/costs")).json()
            csv_report = await auditor.get(
                f"/api/v1/tenants/{tenant}/costs",
                params={"group_by": "model"},
                headers={"Accept": "text/csv"},
            )
            usage_report = (await auditor.get(f"/api/v1/tenants/{tenant}/usage")).json()
            usage_csv = await auditor.get(
                f"/api/v1/tenants/{tenant}/usage", headers={"Accept": "text/csv"}
            )
            task_costs = [
                (await auditor.get(f"/api/v1/tasks/{task_id}/costs")).json() for task_id in task_ids
            ]
            task_csv = await auditor.get(
                f"/api/v1/tasks/{task_ids[0]}/costs", headers={"Accept": "text/csv"}
            )
            chains = [
                (await auditor.get(f"/api/v1/tasks/{task_id}/chain")).json() for task_id in task_ids
            ]

    today = datetime.now(UTC).date().isoformat()
    keys: dict[str, Callable[[Call], str | None]] = {
        "model": lambda c: c.model,
        "day": lambda c: today,
        "tool": lambda c: c.tool,
        "task": lambda c: task_ids[c.task],
        "user": lambda c: c.user,
    }
    for group_by, key in keys.items():
        report = reports[group_by]
        expected = _grouped(calls, key)
        assert {
            g["key"]: _parsed({k: v for k, v in g.items() if k not in ("key", "split")})
            for g in report["groups"]
        } == expected, group_by
        assert _parsed(report["totals"]) == _figures(calls)
        assert report["truncated"] is False
        assert report["currency"] == "USD"
    assert plain["groups"] == []
    assert _parsed(plain["totals"]) == _figures(calls)
    assert _figures(calls)["unpriced_calls"] == 2

    # CSV: the same figures, and a totals row
    assert csv_report.headers["content-type"] == "text/csv; charset=utf-8"
    rows = list(csv.DictReader(io.StringIO(csv_report.text)))
    by_model = {g["key"]: g for g in reports["model"]["groups"]}
    for row in rows[:-1]:
        group = by_model[row["model"]]
        assert Decimal(row["cost_usd"]) == Decimal(group["cost_usd"])
        assert int(row["calls"]) == group["calls"]
        assert int(row["input_tokens"]) == group["input_tokens"]
        assert int(row["unpriced_calls"]) == group["unpriced_calls"]
    assert rows[-1]["model"] == "TOTAL"
    assert Decimal(rows[-1]["cost_usd"]) == _figures(calls)["cost_usd"]
    assert len(rows) == len(by_model) + 1

    # The daily roll-up: per day and model, per model, in all
    per_model = _grouped(calls, lambda c: c.model)
    assert {
        d["model"]: _parsed({k: v for k, v in d.items() if k not in ("day", "model")})
        for d in usage_report["days"]
    } == per_model
    assert all(d["day"] == today for d in usage_report["days"])
    assert {
        m["model"]: _parsed({k: v for k, v in m.items() if k != "model"})
        for m in usage_report["models"]
    } == per_model
    assert _parsed(usage_report["totals"]) == _figures(calls)
    usage_rows = list(csv.DictReader(io.StringIO(usage_csv.text)))
    assert Decimal(usage_rows[-1]["cost_usd"]) == _figures(calls)["cost_usd"]
    assert [r["model"] for r in usage_rows[:-1]] == [d["model"] for d in usage_report["days"]]

    # A task's records: one per call, totals equal to its chain's metrics
    for index, (costs, chain) in enumerate(zip(task_costs, chains, strict=True)):
        mine = [c for c in calls if c.task == index]
        assert [(i["input_tokens"], i["output_tokens"]) for i in costs["items"]] == [
            (c.input_tokens, c.output_tokens) for c in mine
        ]
        assert [
            None if i["cost_usd"] is None else Decimal(i["cost_usd"]) for i in costs["items"]
        ] == [c.cost for c in mine]
        assert _parsed(costs["totals"]) == _figures(mine)
        assert Decimal(costs["totals"]["cost_usd"]) == Decimal(chain["metrics"]["total_cost_usd"])
    task_rows = list(csv.DictReader(io.StringIO(task_csv.text)))
    assert [Decimal(r["cost_usd"]) for r in task_rows[:-1]] == [
        c.cost for c in calls if c.task == 0
    ]
    assert (
        Decimal(task_rows[-1]["cost_usd"])
        == _figures([c for c in calls if c.task == 0])["cost_usd"]
    )


async def test_reports_group_by_agent_split_by_a_second_dimension_and_rank_by_cost(
    database_url: str, fake_llm: FakeLLMServer, service_dir: Path
) -> None:
    models = _priced_models(fake_llm, service_dir)
    settings = service_settings(
        service_dir, database_url, fake_llm, models_file=models, default_model="alpha"
    )
    # (agent or None, model, usage): agents run on their own model; None is a plain task,
    # which the built-in `default` agent runs.
    plan: list[tuple[str | None, str, list[tuple[int, int]]]] = [
        ("writer", "alpha", [(100, 20), (150, 25)]),
        ("critic", "beta", [(300, 40)]),
        (None, "alpha", [(1000, 500)]),
        ("writer", "alpha", [(10, 2)]),
        ("critic", "gamma", [(50, 5)]),  # an unpriced call of an agent, on another model
    ]
    async with running_service(settings, fake_llm) as service:
        tenant = await service.create_tenant(f"c-{uuid4().hex[:12]}")
        other = await service.create_tenant(f"o-{uuid4().hex[:12]}")
        await define_agent(service, tenant, "writer", instructions="Write.", model="alpha")
        await define_agent(service, tenant, "critic", instructions="Judge.", model="beta")
        await define_agent(service, other, "writer", instructions="Other.", model="beta")
        calls: list[Call] = []
        agents: list[str | None] = []
        task_ids: list[str] = []
        for index, (agent, model, usage) in enumerate(plan):
            if model == "gamma":  # the critic on another model: a new version of it
                async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
                    changed = await admin.patch("/api/v1/agents/critic", json={"model": "gamma"})
                    assert changed.status_code == 200, changed.text
            async with service.client(tenant, sub="ann") as client:
                task_ids.append(await _run(client, fake_llm, model, usage, agent))
            calls += [Call("ann", index, model, "llm", p, c) for p, c in usage]
            agents += [agent or "default"] * len(usage)
        async with service.client(other, sub="eve") as eve:  # the other tenant's writer
            await _run(eve, fake_llm, "beta", [(7, 7)], "writer")

        async def report(**params: str) -> Any:
            async with service.client(tenant, sub="ada", roles=("auditor",)) as auditor:
                return await auditor.get(f"/api/v1/tenants/{tenant}/costs", params=params)

        by_agent = (await report(group_by="agent")).json()
        by_day_model = (await report(group_by="day", split_by="model")).json()
        by_agent_model = (await report(group_by="agent", split_by="model")).json()
        top = (await report(group_by="task", order="cost", limit="2")).json()
        async with service.client(tenant, sub="ada", roles=("auditor",)) as auditor:
            split_csv = await auditor.get(
                f"/api/v1/tenants/{tenant}/costs",
                params={"group_by": "agent", "split_by": "model"},
                headers={"Accept": "text/csv"},
            )
        no_group = await report(split_by="model")
        same_twice = await report(group_by="model", split_by="model")

    agent_of = dict(enumerate(agents))
    indexed = list(enumerate(calls))

    def grouped(key: Callable[[int, Call], tuple[str | None, str | None]]) -> dict[Any, Any]:
        groups: dict[Any, list[Call]] = {}
        for index, call in indexed:
            groups.setdefault(key(index, call), []).append(call)
        return {name: _figures(members) for name, members in groups.items()}

    def figures_of(report: dict[str, Any]) -> dict[Any, Any]:
        return {
            (g["key"], g["split"]): _parsed(
                {k: v for k, v in g.items() if k not in ("key", "split")}
            )
            for g in report["groups"]
        }

    today = datetime.now(UTC).date().isoformat()
    assert figures_of(by_agent) == grouped(lambda i, c: (agent_of[i], None))
    assert set(figures_of(by_agent)) == {("writer", None), ("critic", None), ("default", None)}
    assert figures_of(by_day_model) == grouped(lambda i, c: (today, c.model))
    assert figures_of(by_agent_model) == grouped(lambda i, c: (agent_of[i], c.model))
    assert ("critic", "gamma") in figures_of(by_agent_model)  # both versions count for it
    for answer in (by_agent, by_day_model, by_agent_model):
        assert _parsed(answer["totals"]) == _figures(calls)  # the other tenant's run: not here
    assert by_day_model["split_by"] == "model"

    # The costliest tasks first; the totals still count every call.
    per_task = _grouped(calls, lambda c: task_ids[c.task])
    ranked = sorted(per_task, key=lambda task: per_task[task]["cost_usd"], reverse=True)
    assert [g["key"] for g in top["groups"]] == ranked[:2]
    assert top["truncated"] is True
    assert top["order"] == "cost"
    assert _parsed(top["totals"]) == _figures(calls)

    rows = list(csv.DictReader(io.StringIO(split_csv.text)))
    assert list(rows[0]) == ["agent", "model", *FIGURES]
    assert {(row["agent"], row["model"]): Decimal(row["cost_usd"]) for row in rows[:-1]} == {
        key: figures["cost_usd"] for key, figures in figures_of(by_agent_model).items()
    }
    assert rows[-1]["agent"] == "TOTAL"
    for refused in (no_group, same_twice):
        assert assert_problem(refused, 422, "validation-error")["errors"][0]["field"] == (
            "query.split_by"
        )


async def test_who_may_read_costs(service: Service, tenant: str, other_tenant: str) -> None:
    service.fake_llm.script(service.settings.default_model, Reply.text("hi"))
    async with service.client(tenant, sub="mia") as mia:
        task = await submit(mia)
        await stream(mia, task["task_id"])
        own = await mia.get(f"/api/v1/tasks/{task['task_id']}/costs")
        report = await mia.get(f"/api/v1/tenants/{tenant}/costs")
    async with service.client(tenant, sub="max") as max_:
        others = await max_.get(f"/api/v1/tasks/{task['task_id']}/costs")
    async with service.client(tenant, sub="vic", roles=("viewer",)) as viewer:
        viewed = await viewer.get(f"/api/v1/tasks/{task['task_id']}/costs")
    async with service.client(other_tenant, sub="eve", roles=("tenant_admin",)) as eve:
        foreign_task = await eve.get(f"/api/v1/tasks/{task['task_id']}/costs")
        foreign_report = await eve.get(f"/api/v1/tenants/{tenant}/costs")
        foreign_usage = await eve.get(f"/api/v1/tenants/{tenant}/usage")

    assert own.status_code == 200  # a member sees what its own task cost
    assert len(own.json()["items"]) == 1
    assert assert_problem(report, 403, "forbidden")["permission"] == "cost:view"
    assert assert_problem(others, 403, "forbidden")["permission"] == "cost:view"
    assert assert_problem(viewed, 403, "forbidden")["permission"] == "cost:view"
    for response in (foreign_task, foreign_report, foreign_usage):
        assert_problem(response, 404, "not-found")


async def test_report_periods_are_checked(service: Service, tenant: str) -> None:
    now = datetime.now(UTC)
    async with service.client(tenant, roles=("auditor",)) as auditor:
        backwards = await auditor.get(
            f"/api/v1/tenants/{tenant}/costs",
            params={"from": now.isoformat(), "to": (now - timedelta(days=1)).isoformat()},
        )
        too_long = await auditor.get(
            f"/api/v1/tenants/{tenant}/usage", params={"from": "2024-01-01", "to": "2025-06-01"}
        )
        bad_group = await auditor.get(
            f"/api/v1/tenants/{tenant}/costs", params={"group_by": "planet"}
        )
        empty = (
            await auditor.get(f"/api/v1/tenants/{tenant}/costs", params={"group_by": "day"})
        ).json()

    assert assert_problem(backwards, 422, "validation-error")["errors"][0]["field"] == "query.from"
    assert assert_problem(too_long, 422, "validation-error")["errors"][0]["field"] == "query.to"
    assert_problem(bad_group, 422, "validation-error")
    assert empty["groups"] == []
    assert empty["totals"] == {
        "calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": "0",
        "unpriced_calls": 0,
        "sandbox_s": "0",
    }


async def test_the_daily_roll_up_adds_up_under_concurrent_runs(
    service: Service, tenant: str
) -> None:
    model = service.settings.default_model
    service.fake_llm.always(model, Reply.text("ok", prompt_tokens=123, completion_tokens=45))
    async with service.client(tenant) as client:
        accepted = await asyncio.gather(*[submit(client) for _ in range(30)])
        await asyncio.gather(*[stream(client, a["task_id"]) for a in accepted])
    async with service.client(tenant, roles=("auditor",)) as auditor:
        usage = (await auditor.get(f"/api/v1/tenants/{tenant}/usage")).json()
        costs = (await auditor.get(f"/api/v1/tenants/{tenant}/costs")).json()

    [day] = usage["days"]
    assert day["calls"] == 30
    assert day["input_tokens"] == 30 * 123
    assert day["output_tokens"] == 30 * 45
    assert usage["totals"] == costs["totals"]


async def test_csv_reports_keep_text_from_users_from_running_as_formulas(
    service: Service, tenant: str
) -> None:
    # Each would run in a spreadsheet: a formula, an `@` function, and leading signs (a token's
    # `sub` may not hold a tab or a carriage return; the test below covers those).
    subjects = ['=HYPERLINK("http://x")', "@SUM(1)", "-2+3", "+cmd", "carol"]
    service.fake_llm.script(service.settings.default_model, *[Reply.text("hi") for _ in subjects])
    task_ids = {}
    for subject in subjects:
        async with service.client(tenant, sub=subject) as client:
            task = await submit(client)
            await stream(client, task["task_id"])
            task_ids[subject] = task["task_id"]
    async with service.client(tenant, roles=("auditor",)) as auditor:
        report = await auditor.get(
            f"/api/v1/tenants/{tenant}/costs",
            params={"group_by": "user"},
            headers={"Accept": "text/csv"},
        )
        as_json = await auditor.get(f"/api/v1/tenants/{tenant}/costs", params={"group_by": "user"})
        task_csv = await auditor.get(
            f"/api/v1/tasks/{task_ids[subjects[0]]}/costs", headers={"Accept": "text/csv"}
        )

    assert report.status_code == 200, report.text
    rows = list(csv.DictReader(io.StringIO(report.text)))
    keys = {row["user"]: row for row in rows[:-1]}
    assert set(keys) == {"'" + s for s in subjects[:-1]} | {"carol"}
    # The JSON report keeps the ids as they are; only the CSV cells are neutralised.
    assert {group["key"] for group in as_json.json()["groups"]} == set(subjects)
    for row in rows:
        assert int(row["calls"]) >= 1
        assert Decimal(row["cost_usd"]) >= 0
    [record] = list(csv.DictReader(io.StringIO(task_csv.text)))[:-1]
    assert record["user_id"] == """'=HYPERLINK("http://x")"""
    assert int(record["input_tokens"]) == 11


def test_csv_figures_stay_numbers_and_only_text_is_neutralised() -> None:
    text = to_csv(
        ["key", "calls", "cost_usd", "note"],
        [["-x", -3, Decimal("-1.50"), "=1+1"], ["\rcr", 0, Decimal("0"), "plain - text"]],
    )

    assert list(csv.reader(io.StringIO(text))) == [
        ["key", "calls", "cost_usd", "note"],
        ["'-x", "-3", "-1.5", "'=1+1"],
        ["'\rcr", "0", "0", "plain - text"],
    ]
