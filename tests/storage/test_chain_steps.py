"""A chain's steps as a filtered reader pages through them: the page itself, and of the earlier
steps only those that can teach the reader's view a secret, picked out by the database."""

import json
from typing import Any
from uuid import UUID, uuid4

import pytest

from app.chain import (
    ChainMetrics,
    ReasoningStep,
    StepType,
    SynthesisInfo,
    ToolCallInfo,
    ToolType,
)
from app.runs.recorder import step_facts
from app.security.visibility import REDACTED, ReaderView, VisibilityPolicy
from app.storage import Database
from app.storage.chains import ChainRepository, StepRow
from app.storage.runs import Fence, RunStores, RunWrite
from app.storage.runs import rows as run_rows
from app.storage.types import RawJSON
from tests.factories import stored_task

SECRET = "hunter2-S3CRET-77ab"
MAX_INT4 = 2**31 - 1


@pytest.fixture
def tenant() -> str:
    """A tenant id of this test's own database (no tenant row is needed here)."""
    return f"t-{uuid4().hex[:12]}"


def _reader(*sensitive_fields: str) -> ReaderView:
    return ReaderView(
        VisibilityPolicy(),
        roles=frozenset({"member"}),
        full_access=False,
        sensitive_fields=sensitive_fields,
    )


def _call(arguments: dict[str, Any]) -> ReasoningStep:
    return ReasoningStep(
        type=StepType.TOOL_CALL,
        tool_call=ToolCallInfo(
            tool_type=ToolType.EXTERNAL, tool_name="crm_login", arguments=arguments
        ),
    )


def _answer(conclusion: str) -> ReasoningStep:
    return ReasoningStep(type=StepType.SYNTHESIS, synthesis=SynthesisInfo(conclusion=conclusion))


async def _stored_chain(database: Database, tenant: str, steps: list[ReasoningStep]) -> UUID:
    """A chain holding `steps` (numbered from 1), stored as runs store theirs."""
    stores = RunStores.of(database)
    task_id, chain_id = await stored_task(stores.queue, tenant, runner_id="r")
    metrics = RawJSON(ChainMetrics().model_dump_json())
    rows: list[run_rows.StepRow] = []
    for number, step in enumerate(steps, start=1):
        step.step_number = number
        call = step.tool_call
        rows.append(
            {
                "chain_id": chain_id,
                "step_number": number,
                "id": step.id,
                "tenant_id": tenant,
                "seq": number,
                "type": step.type,
                "tool_type": None if call is None else call.tool_type,
                "tool_name": None if call is None else call.tool_name,
                "visibility": step.visibility.level,
                "timestamp": step.timestamp,
                "data": RawJSON(step.model_dump_json()),
                "metrics": metrics,
            }
        )
    write = RunWrite(task_id, chain_id, Fence("r", 1), 0, len(steps), steps=rows)
    assert await stores.writes.append([write]) == set()
    return chain_id


def _rendered(reader: ReaderView, rows: list[StepRow], after: int) -> list[dict[str, Any]]:
    documents = []
    for number, document, step_type, tool_type, tool_name, level in rows:
        facts = step_facts(step_type, tool_type, tool_name, level)
        if number <= after:
            reader.learn(document, facts)
        elif (rendered := reader.render(document, facts)) is not None:
            documents.append(json.loads(rendered))
    return documents


async def test_paging_a_long_chain_reads_the_page_and_only_the_earlier_steps_that_teach(
    database: Database,
) -> None:
    tenant = f"steps-{uuid4().hex[:8]}"
    steps = [_call({"expression": f"{n} * 2"}) for n in range(1, 1001)]
    # The secret under its key, written three ways; and a name-like key that is not one.
    steps[4] = _call({"user": "ada", "PassWord": SECRET})
    steps[399] = _call({"raw": json.dumps({"nested": json.dumps({"password": SECRET})})})
    steps[599] = _call({"raw": '{"p\\u0061ssword": "' + SECRET + '"}'})
    steps[699] = _call({"apiXkey": SECRET, "hint": "my password"})
    steps[999] = _answer(f"Logged in with {SECRET}.")
    chain_id = await _stored_chain(database, tenant, steps)
    teaching = [5, 400, 600]

    read_per_page: list[int] = []
    async with database.read() as connection:
        chains = ChainRepository(connection, tenant)
        for after in range(0, 1000, 100):
            needles = _reader("password", "api_key").learning_needles
            earlier = await chains.step_rows(chain_id, through=after, holding=needles)
            page = await chains.step_rows(chain_id, after=after, limit=101)
            assert [row[0] for row in earlier] == [n for n in teaching if n <= after]
            assert [row[0] for row in page] == list(range(after + 1, min(after + 102, 1001)))
            read_per_page.append(len(earlier) + len(page[:100]))
        last_page = await chains.step_rows(chain_id, after=900, limit=100)
        learned_from = await chains.step_rows(chain_id, through=900, holding=needles)

    # Page k costs its own 100 rows and the three teaching steps at most, not k * 100.
    assert max(read_per_page) == 103
    assert read_per_page[-1] == read_per_page[-4]
    # And the secret the early steps taught is still masked on the last page.
    answer = _rendered(_reader("password", "api_key"), [*learned_from, *last_page], 900)[-1]
    assert answer["synthesis"]["conclusion"] == f"Logged in with {REDACTED}."


async def test_the_database_finds_every_step_a_view_learns_from_and_skips_the_others(
    database: Database,
) -> None:
    tenant = f"steps-{uuid4().hex[:8]}"
    teaching = [
        _call({"PASSWORD": SECRET}),
        _call({"pa\u017fsword": SECRET}),  # long s
        _call({"pa\u00dfword": SECRET}),  # sharp s, casefolded to "ss"
        _call({"api_\u212aey": SECRET}),  # Kelvin sign
        _call({"raw": '{"API_KEY": "' + SECRET + '"}'}),
        _call({"note": f"Action Input: {{'password': '{SECRET}'}}"}),
        _call({"raw": '{"p\\u0061ssword": "' + SECRET + '"}'}),
    ]
    idle = [
        _call({"note": "the password is in the vault"}),
        _call({"apiXkey": SECRET}),  # `_` in a name matches itself only
        _call({"api%key": SECRET}),
        _answer("done"),
    ]
    chain_id = await _stored_chain(database, tenant, [*teaching, *idle])
    needles = _reader("password", "api_key").learning_needles

    async with database.read() as connection:
        chains = ChainRepository(connection, tenant)
        found = await chains.step_rows(chain_id, through=MAX_INT4, holding=needles)
        every = await chains.step_rows(chain_id)

    assert [row[0] for row in found] == list(range(1, len(teaching) + 1))
    # The claim checked against the view itself, on the text as this database returns it.
    for number, document, step_type, tool_type, tool_name, level in every:
        reader = _reader("password", "api_key")
        reader.learn(document, step_facts(step_type, tool_type, tool_name, level))
        later = _answer(SECRET).model_dump_json()
        learned = reader.render(later, step_facts("synthesis", None, None, "full")) != later
        assert learned == (number <= len(teaching)), number


async def test_a_page_after_the_last_possible_step_number_is_empty(database: Database) -> None:
    tenant = f"steps-{uuid4().hex[:8]}"
    chain_id = await _stored_chain(database, tenant, [_call({"password": SECRET}), _answer("ok")])
    needles = _reader("password").learning_needles

    async with database.read() as connection:
        chains = ChainRepository(connection, tenant)
        page = await chains.step_rows(chain_id, after=MAX_INT4, limit=1001)
        earlier = await chains.step_rows(chain_id, through=MAX_INT4, holding=needles)
        other_tenant = await ChainRepository(connection, "someone-else").step_rows(chain_id)

    assert page == []
    assert [row[0] for row in earlier] == [1]
    assert other_tenant == []
