"""The level a reader sees each stored step at (tenant rules, role overrides, full access), what
a summary or hidden step shows, and the policy's own validation."""

import json
from typing import Any

import pytest
from pydantic import ValidationError

from app.chain import ReasoningStep, ToolType, VisibilityLevel
from app.runs.recorder import step_facts
from app.security.visibility import REDACTED, StepSummary, VisibilityPolicy, VisibilityRule
from app.tools.builtin.llm import LLM_TOOL_NAME
from tests.security.visibility_helpers import (
    FULL,
    HIDDEN,
    SECRET,
    SUMMARY,
    call,
    facts,
    result,
    shown,
    synthesis,
    thinking,
    view,
)

# -- levels


def test_a_reader_without_rules_sees_the_level_stored_with_the_step() -> None:
    reader = view()

    assert [reader.level(facts(level=level)) for level in (FULL, SUMMARY, HIDDEN)] == [
        FULL,
        SUMMARY,
        HIDDEN,
    ]


def test_a_tenant_rule_for_the_tool_name_beats_the_one_for_its_type() -> None:
    policy = VisibilityPolicy(tool_types={ToolType.DATABASE: HIDDEN}, tools={"sql_query": SUMMARY})

    assert view(policy).level(facts()) is SUMMARY
    assert view(policy).level(facts(tool="other_query")) is HIDDEN
    assert view(policy).level(facts(tool_type=ToolType.LLM, tool="llm")) is FULL


def test_a_role_override_beats_the_tenant_rules() -> None:
    policy = VisibilityPolicy(
        tools={"sql_query": HIDDEN},
        roles={"analyst": VisibilityRule(tool_types={ToolType.DATABASE: FULL})},
    )

    assert view(policy, roles={"analyst"}).level(facts()) is FULL
    assert view(policy, roles={"member"}).level(facts()) is HIDDEN


def test_a_role_override_by_tool_name_beats_its_own_rule_by_type() -> None:
    rule = VisibilityRule(tool_types={ToolType.DATABASE: FULL}, tools={"sql_query": SUMMARY})
    policy = VisibilityPolicy(roles={"viewer": rule})

    assert view(policy, roles={"viewer"}).level(facts()) is SUMMARY


def test_the_most_permissive_of_the_readers_role_overrides_wins() -> None:
    policy = VisibilityPolicy(
        tool_types={ToolType.DATABASE: FULL},
        roles={
            "viewer": VisibilityRule(tools={"sql_query": HIDDEN}),
            "member": VisibilityRule(tool_types={ToolType.DATABASE: SUMMARY}),
        },
    )

    assert view(policy, roles={"viewer"}).level(facts()) is HIDDEN
    assert view(policy, roles={"viewer", "member"}).level(facts()) is SUMMARY


def test_a_role_override_silent_on_the_tool_leaves_the_tenant_rules() -> None:
    policy = VisibilityPolicy(
        tools={"sql_query": SUMMARY},
        roles={"viewer": VisibilityRule(tool_types={ToolType.LLM: HIDDEN})},
    )

    assert view(policy, roles={"viewer"}).level(facts()) is SUMMARY


@pytest.mark.parametrize(
    ("policy", "roles", "expected"),
    [
        (VisibilityPolicy(tool_types={ToolType.LLM: HIDDEN}), {"member"}, HIDDEN),
        (VisibilityPolicy(tools={LLM_TOOL_NAME: SUMMARY}), {"member"}, SUMMARY),
        (
            VisibilityPolicy(tool_types={ToolType.LLM: HIDDEN}, tools={LLM_TOOL_NAME: SUMMARY}),
            {"member"},
            SUMMARY,
        ),
        (
            VisibilityPolicy(roles={"viewer": VisibilityRule(tool_types={ToolType.LLM: HIDDEN})}),
            {"viewer"},
            HIDDEN,
        ),
        (
            VisibilityPolicy(
                tool_types={ToolType.LLM: HIDDEN},
                roles={"analyst": VisibilityRule(tools={LLM_TOOL_NAME: FULL})},
            ),
            {"analyst"},
            FULL,
        ),
    ],
)
def test_a_thinking_step_is_seen_at_the_level_of_the_llm_tools_steps(
    policy: VisibilityPolicy, roles: set[str], expected: VisibilityLevel
) -> None:
    reader = view(policy, roles=roles)
    llm_call = facts(ToolType.LLM, LLM_TOOL_NAME)

    assert reader.level(llm_call) is expected
    assert reader.level(thinking("hmm")[1]) is expected


def test_a_thinking_step_stored_without_tool_columns_follows_the_llm_rules() -> None:
    # Chains stored before this rule have NULL tool columns on thinking steps: the step type
    # alone decides.
    stored_json, _ = thinking("I should look up the customer first")
    old_facts = step_facts("thinking", None, None, "full")

    assert (
        view(VisibilityPolicy(tool_types={ToolType.LLM: HIDDEN})).render(stored_json, old_facts)
        is None
    )


def test_a_thinking_step_keeps_its_stored_level_when_no_rule_names_the_llm() -> None:
    policy = VisibilityPolicy(tool_types={ToolType.DATABASE: HIDDEN}, tools={"crm_lookup": HIDDEN})

    assert view(policy).level(thinking("hmm")[1]) is FULL
    assert view(policy).level(thinking("hmm", SUMMARY)[1]) is SUMMARY


def test_a_synthesis_step_keeps_its_stored_level_whatever_the_rules() -> None:
    everything_hidden = dict.fromkeys(ToolType, HIDDEN)
    policy = VisibilityPolicy(
        tool_types=everything_hidden,
        tools={LLM_TOOL_NAME: HIDDEN},
        roles={"member": VisibilityRule(tool_types=everything_hidden)},
    )

    assert view(policy).level(synthesis("done")[1]) is FULL
    assert view(policy).level(synthesis("done", SUMMARY)[1]) is SUMMARY


def test_a_thinking_step_under_llm_summary_shows_no_thought() -> None:
    thought = "The user's churn risk is high because of the refund history"
    stored = thinking(thought)

    document = shown(view(VisibilityPolicy(tools={LLM_TOOL_NAME: SUMMARY})), stored)

    assert document["visibility"] == {"level": "summary", "summary": "thinking step"}
    assert "thinking" not in document
    assert thought not in json.dumps(document)


def test_a_hidden_thinking_step_still_teaches_the_view_its_secrets() -> None:
    reader = view(VisibilityPolicy(tool_types={ToolType.LLM: HIDDEN}))

    assert reader.render(*thinking(f'I will log in with {{"password": "{SECRET}"}}')) is None
    assert shown(reader, synthesis(f"Logged in: {SECRET}"))["synthesis"]["conclusion"] == (
        f"Logged in: {REDACTED}"
    )


def test_full_access_sees_a_thinking_step_whole_whatever_the_llm_rules() -> None:
    stored = thinking("hmm")
    policy = VisibilityPolicy(
        tool_types={ToolType.LLM: HIDDEN},
        roles={"auditor": VisibilityRule(tools={LLM_TOOL_NAME: HIDDEN})},
    )

    assert view(policy, roles={"auditor"}, full_access=True).render(*stored) is stored[0]


def test_a_tool_result_step_follows_its_tools_rules() -> None:
    policy = VisibilityPolicy(tools={"crm_lookup": HIDDEN})

    assert view(policy).render(*result({"name": "Ada"})) is None


# -- full access


def test_full_access_gets_the_stored_text_itself_secrets_included() -> None:
    stored = call({"password": SECRET})
    policy = VisibilityPolicy(
        tools={"crm_lookup": HIDDEN},
        roles={"auditor": VisibilityRule(tools={"crm_lookup": HIDDEN})},
    )
    reader = view(policy, roles={"auditor"}, full_access=True)

    assert reader.served == "full"
    assert reader.level(stored[1]) is FULL
    assert reader.render(*stored) is stored[0]
    later = synthesis(f"the password is {SECRET}")
    assert reader.render(*later) is later[0]
    assert SECRET in stored[0]


def test_a_restricted_reader_is_served_filtered() -> None:
    assert view().served == "filtered"
    assert not view().full_access


# -- hidden and summary


def test_a_hidden_step_is_not_sent() -> None:
    assert view().render(*call({"q": "x"}, level=HIDDEN)) is None


def test_a_summary_step_is_its_summary_only() -> None:
    stored = call({"password": SECRET, "q": "churn"}, level=SUMMARY, summary="Looked up a customer")
    step = ReasoningStep.model_validate_json(stored[0])

    document = shown(view(), stored)

    assert document == {
        "id": str(step.id),
        "step_number": 1,
        "type": "tool_call",
        "timestamp": json.loads(stored[0])["timestamp"],
        "parent_step_id": None,
        "visibility": {"level": "summary", "summary": "Looked up a customer"},
    }
    assert StepSummary.model_validate(document).visibility.summary == "Looked up a customer"
    assert list(StepSummary.model_fields) == list(document)


def test_a_summary_step_without_a_stored_summary_gets_a_neutral_one() -> None:
    stored = result({"rows": 3}, level=SUMMARY)

    document = shown(view(), stored)

    assert document["visibility"] == {"level": "summary", "summary": "tool_result step"}
    assert document["parent_step_id"] == json.loads(stored[0])["parent_step_id"]
    assert not {"thinking", "tool_call", "tool_result", "synthesis"} & set(document)


def test_a_summary_repeating_a_secret_is_masked() -> None:
    reader = view()
    reader.render(*call({"password": SECRET}, level=HIDDEN))

    document = shown(reader, call({}, level=SUMMARY, summary=f"Logged in with {SECRET}"))
    own = shown(view(), call({"password": SECRET}, level=SUMMARY, summary=f"used {SECRET}"))

    assert document["visibility"]["summary"] == f"Logged in with {REDACTED}"
    assert own["visibility"]["summary"] == f"used {REDACTED}"


# -- the policy


def test_a_policy_round_trips_through_json() -> None:
    policy = VisibilityPolicy(
        tool_types={ToolType.LLM: SUMMARY},
        tools={"sql_query": HIDDEN},
        roles={"analyst": VisibilityRule(tools={"sql_query": FULL})},
        sensitive_fields=["ssn"],
    )

    assert VisibilityPolicy.model_validate_json(policy.model_dump_json()) == policy


@pytest.mark.parametrize(
    "document",
    [
        {"tools": {"Search": "full", "search": "hidden"}},
        {"roles": {"Viewer": {}, "viewer": {}}},
        {"sensitive_fields": ["SSN", "ssn"]},
        {"sensitive_fields": [""]},
        {"sensitive_fields": ["x" * 129]},
        {"tools": {"": "full"}},
        {"sensitive_fields": [f"f{i}" for i in range(201)]},
        {"tools": {f"t{i}": "full" for i in range(201)}},
        {"roles": {"viewer": {"roles": {}}}},
        {"tool_types": {"spreadsheet": "full"}},
        {"tools": {"search": "partial"}},
        {"colour": "blue"},
    ],
)
def test_a_policy_refuses_unreasonable_settings(document: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        VisibilityPolicy.model_validate(document)
