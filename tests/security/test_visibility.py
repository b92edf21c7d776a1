"""The per-reader view of stored steps: visibility levels, summaries, redaction and masking."""

import json
import re
import string
import sys
from collections.abc import Iterable
from typing import Any
from uuid import uuid4

import pytest
from pydantic import ValidationError

from app.chain import (
    ReasoningStep,
    StepType,
    SynthesisInfo,
    ThinkingInfo,
    ToolCallInfo,
    ToolResultInfo,
    ToolType,
    VisibilityConfig,
    VisibilityLevel,
)
from app.runs.recorder import step_facts
from app.security.visibility import (
    REDACTED,
    ReaderView,
    StepFacts,
    StepSummary,
    VisibilityPolicy,
    VisibilityRule,
)
from app.tools.builtin.llm import LLM_TOOL_NAME

FULL, SUMMARY, HIDDEN = VisibilityLevel.FULL, VisibilityLevel.SUMMARY, VisibilityLevel.HIDDEN
SECRET = "hunter2-xyz"

Stored = tuple[str, StepFacts]


def view(
    policy: VisibilityPolicy | None = None,
    *,
    roles: Iterable[str] = ("member",),
    full_access: bool = False,
    sensitive_fields: Iterable[str] = ("password",),
) -> ReaderView:
    return ReaderView(
        policy or VisibilityPolicy(),
        roles=frozenset(roles),
        full_access=full_access,
        sensitive_fields=sensitive_fields,
    )


def call(
    arguments: dict[str, Any],
    *,
    tool: str = "crm_lookup",
    tool_type: ToolType = ToolType.EXTERNAL,
    level: VisibilityLevel = FULL,
    summary: str | None = None,
) -> Stored:
    step = ReasoningStep(
        type=StepType.TOOL_CALL,
        step_number=1,
        tool_call=ToolCallInfo(tool_type=tool_type, tool_name=tool, arguments=arguments),
        visibility=VisibilityConfig(level=level, summary=summary),
    )
    return step.model_dump_json(), StepFacts(StepType.TOOL_CALL, tool_type, tool, level)


def result(
    value: Any,
    *,
    tool: str = "crm_lookup",
    tool_type: ToolType = ToolType.EXTERNAL,
    level: VisibilityLevel = FULL,
) -> Stored:
    step = ReasoningStep(
        type=StepType.TOOL_RESULT,
        step_number=2,
        parent_step_id=uuid4(),
        tool_result=ToolResultInfo(
            correlation_id=uuid4(), success=True, result=value, duration_ms=3.5, input_tokens=7
        ),
        visibility=VisibilityConfig(level=level),
    )
    return step.model_dump_json(), StepFacts(StepType.TOOL_RESULT, tool_type, tool, level)


def synthesis(conclusion: str, level: VisibilityLevel = FULL) -> Stored:
    step = ReasoningStep(
        type=StepType.SYNTHESIS,
        step_number=3,
        synthesis=SynthesisInfo(conclusion=conclusion),
        visibility=VisibilityConfig(level=level),
    )
    return step.model_dump_json(), StepFacts(StepType.SYNTHESIS, None, None, level)


def thinking(thought: str, level: VisibilityLevel = FULL) -> Stored:
    step = ReasoningStep(
        type=StepType.THINKING,
        thinking=ThinkingInfo(thought=thought),
        visibility=VisibilityConfig(level=level),
    )
    return step.model_dump_json(), StepFacts(StepType.THINKING, None, None, level)


def shown(reader: ReaderView, stored: Stored) -> dict[str, Any]:
    rendered = reader.render(*stored)
    assert rendered is not None
    document: dict[str, Any] = json.loads(rendered)
    return document


def facts(
    tool_type: ToolType | None = ToolType.DATABASE,
    tool: str | None = "sql_query",
    level: VisibilityLevel = FULL,
) -> StepFacts:
    return StepFacts(StepType.TOOL_CALL, tool_type, tool, level)


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


# -- redaction by key


def test_sensitive_keys_are_redacted_at_any_depth_whatever_their_value() -> None:
    stored = result(
        {
            "account": {
                "owner": {"login": "ada", "password": SECRET, "history": [{"password": 12345}]},
                "Password": {"old": ["a", "b"]},
            },
            "rows": 3,
        }
    )

    document = shown(view(), stored)

    account = document["tool_result"]["result"]["account"]
    assert account["owner"] == {
        "login": "ada",
        "password": REDACTED,
        "history": [{"password": REDACTED}],
    }
    assert account["Password"] == REDACTED
    assert document["tool_result"]["result"]["rows"] == 3
    assert document["tool_result"]["input_tokens"] == 7
    assert (
        ReasoningStep.model_validate(document).id == ReasoningStep.model_validate_json(stored[0]).id
    )


def test_key_names_match_case_insensitively_both_ways() -> None:
    stored = call({"API_Key": SECRET, "PASSWORD": SECRET})

    document = shown(view(sensitive_fields=["api_key", "Password"]), stored)

    assert document["tool_call"]["arguments"] == {"API_Key": REDACTED, "PASSWORD": REDACTED}


def test_key_names_match_whole_keys_only() -> None:
    stored = call({"password_hint": "pet's name", "passwords_rotated": 2})

    assert view().render(*stored) is stored[0]


def test_the_tenants_own_sensitive_fields_are_added_by_the_view() -> None:
    policy = VisibilityPolicy(sensitive_fields=["ssn"])

    document = shown(view(policy, sensitive_fields=()), call({"ssn": "078-05-1120"}))

    assert document["tool_call"]["arguments"] == {"ssn": REDACTED}


def test_an_llm_results_json_string_tool_call_arguments_are_redacted() -> None:
    arguments = json.dumps({"user": "ada", "password": SECRET})
    stored = result(
        {
            "content": None,
            "tool_calls": [{"id": "call_1", "name": "crm_login", "arguments": arguments}],
        },
        tool="gpt-4o",
        tool_type=ToolType.LLM,
    )

    document = shown(view(), stored)

    tool_call = document["tool_result"]["result"]["tool_calls"][0]
    assert tool_call["id"] == "call_1"
    assert json.loads(tool_call["arguments"]) == {"user": "ada", "password": REDACTED}
    assert SECRET not in json.dumps(document)


def test_openai_message_shapes_in_an_llm_call_are_redacted() -> None:
    messages = [
        {"role": "user", "content": "log me in"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "crm_login", "arguments": f'{{"password": "{SECRET}"}}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": json.dumps({"session": {"token": "tok-123456"}, "ok": True}),
        },
    ]
    stored = call({"messages": messages}, tool="gpt-4o", tool_type=ToolType.LLM)

    document = shown(view(sensitive_fields=["password", "token"]), stored)

    sent = document["tool_call"]["arguments"]["messages"]
    assert sent[0] == messages[0]
    function = sent[1]["tool_calls"][0]["function"]
    assert function["name"] == "crm_login"
    assert json.loads(function["arguments"]) == {"password": REDACTED}
    assert json.loads(sent[2]["content"]) == {"session": {"token": REDACTED}, "ok": True}
    assert SECRET not in json.dumps(document)
    assert "tok-123456" not in json.dumps(document)


def test_a_key_spelled_with_unicode_escapes_in_a_json_string_is_redacted() -> None:
    stored = call({"raw": '{"p\\u0061ssword": "' + SECRET + '"}'})

    document = shown(view(), stored)

    assert json.loads(document["tool_call"]["arguments"]["raw"]) == {"password": REDACTED}


def test_the_step_envelope_is_never_redacted() -> None:
    stored = call({"id": "cust-42", "type": "vip"})
    step = json.loads(stored[0])

    document = shown(view(sensitive_fields=["id", "type"]), stored)

    assert (document["id"], document["type"]) == (step["id"], "tool_call")
    assert document["tool_call"]["arguments"] == {"id": REDACTED, "type": REDACTED}


def test_a_quoted_key_in_free_text_is_redacted_before_the_call_exists() -> None:
    # ReAct: the LLM's reply names the arguments before the tool_call step records them.
    reply = f'Thought: log in\nAction: crm_login\nAction Input: {{"password": "{SECRET}"}}'
    reader = view()

    document = shown(reader, result(reply, tool="gpt-4o", tool_type=ToolType.LLM))
    later = shown(reader, synthesis(f"Logged in as ada/{SECRET}."))

    assert document["tool_result"]["result"] == (
        f'Thought: log in\nAction: crm_login\nAction Input: {{"password": "{REDACTED}"}}'
    )
    assert later["synthesis"]["conclusion"] == f"Logged in as ada/{REDACTED}."


def test_short_values_are_redacted_by_key_but_not_remembered() -> None:
    reader = view()

    assert shown(reader, call({"password": "abc"}))["tool_call"]["arguments"] == {
        "password": REDACTED
    }
    assert shown(reader, synthesis("abc is fine"))["synthesis"]["conclusion"] == "abc is fine"


# -- masking by value


def test_a_later_synthesis_repeating_a_secret_is_masked() -> None:
    reader = view()
    reader.render(*call({"password": SECRET}))

    document = shown(reader, synthesis(f"Your password is {SECRET}; keep {SECRET} safe."))

    assert document["synthesis"]["conclusion"] == (
        f"Your password is {REDACTED}; keep {REDACTED} safe."
    )


def test_numbers_and_nested_values_under_a_sensitive_key_are_remembered_as_text() -> None:
    reader = view(sensitive_fields=["pin", "credentials"])
    reader.render(*call({"pin": 48213, "credentials": {"user": "ada", "key": "k-998877"}}))

    document = shown(reader, thinking("pin 48213, key k-998877, user ada"))

    assert document["thinking"]["thought"] == f"pin {REDACTED}, key {REDACTED}, user ada"


def test_secrets_are_masked_in_keys_and_in_json_strings_of_later_steps() -> None:
    reader = view()
    reader.render(*call({"password": SECRET}))

    document = shown(
        reader,
        result({"by_password": {SECRET: 1}, "echo": json.dumps({"said": f"pw {SECRET}"})}),
    )

    assert document["tool_result"]["result"]["by_password"] == {REDACTED: 1}
    assert json.loads(document["tool_result"]["result"]["echo"]) == {"said": f"pw {REDACTED}"}


def test_secrets_with_json_special_characters_are_masked_wherever_they_recur() -> None:
    secret = 'p"a\\ss/w\nrd'
    reader = view()
    reader.render(*call({"password": secret}))

    plain = shown(reader, synthesis(f"it was {secret}!"))
    nested = shown(reader, result({"echo": json.dumps({"said": secret})}))

    assert plain["synthesis"]["conclusion"] == f"it was {REDACTED}!"
    assert json.loads(nested["tool_result"]["result"]["echo"]) == {"said": REDACTED}


def test_a_non_ascii_secret_is_masked_inside_ascii_escaped_json_strings() -> None:
    secret = "pässwört-Geheim"
    reader = view()
    reader.render(*call({"password": secret}))
    arguments = json.dumps({"note": f"uses {secret}"})  # ensure_ascii: "p\u00e4ssw\u00f6rt"
    message = {"role": "assistant", "tool_calls": [{"function": {"arguments": arguments}}]}

    rendered = reader.render(*call({"messages": [message]}, tool="gpt-4o", tool_type=ToolType.LLM))

    assert rendered is not None
    sent = json.loads(rendered)["tool_call"]["arguments"]["messages"][0]
    assert json.loads(sent["tool_calls"][0]["function"]["arguments"]) == {
        "note": f"uses {REDACTED}"
    }
    assert "Geheim" not in rendered


def test_hidden_steps_still_teach_the_view_their_secrets() -> None:
    reader = view(VisibilityPolicy(tools={"crm_login": HIDDEN}))

    assert reader.render(*call({"password": SECRET}, tool="crm_login")) is None
    assert shown(reader, synthesis(SECRET))["synthesis"]["conclusion"] == REDACTED


def test_learn_primes_masking_with_steps_that_are_not_sent() -> None:
    earlier, later = call({"password": SECRET}), synthesis(f"done with {SECRET}")
    primed, cold = view(), view()

    primed.learn(*earlier)

    assert shown(primed, later)["synthesis"]["conclusion"] == f"done with {REDACTED}"
    assert cold.render(*later) is later[0]


def test_a_full_access_view_learns_nothing_and_masks_nothing() -> None:
    reader = view(full_access=True)
    reader.learn(*call({"password": SECRET}))
    later = synthesis(SECRET)

    assert reader.render(*later) is later[0]


def test_the_secret_appears_nowhere_in_any_restricted_output() -> None:
    policy = VisibilityPolicy(tools={"crm_login": SUMMARY})
    reader = view(policy, sensitive_fields=["password", "api_key"])
    chain = [
        thinking(f'I will call crm_login with {{"password": "{SECRET}"}}'),
        call({"user": "ada", "password": SECRET}, tool="crm_login", summary=f"login {SECRET}"),
        result({"session": {"api_key": "sk-live-000111"}}, tool="crm_login"),
        result({"content": f"Your key sk-live-000111 and {SECRET}"}, tool="gpt-4o"),
        synthesis(f"Done: {SECRET} / sk-live-000111"),
    ]

    outputs = [reader.render(*stored) for stored in chain]

    for output in outputs:
        assert output is not None
        json.loads(output)
        assert SECRET not in output
        assert "sk-live-000111" not in output


# -- fast path


def test_a_step_with_nothing_sensitive_is_returned_as_the_same_object() -> None:
    reader = view(sensitive_fields=["password", "api_key"])
    reader.learn(*call({"password": SECRET}))
    stored = result({"rows": [{"name": "Ada", "city": "London"}]})

    assert reader.render(*stored) is stored[0]


def test_a_step_that_only_mentions_a_field_name_is_returned_unchanged() -> None:
    stored = thinking("I need the 'password' field and the password itself")

    assert view().render(*stored) is stored[0]


def test_the_fast_path_does_not_parse() -> None:
    not_json = '{"this is": not json at all'
    reader = view()

    reader.learn(not_json, facts())

    assert reader.render(not_json, facts()) is not_json
    with pytest.raises(json.JSONDecodeError):  # the careful path would parse
        reader.render('{"password": ', facts())


# -- what earlier steps a reader must learn from


def _holds(needles: frozenset[str], text: str) -> bool:
    """The test `learning_needles` states: a needle in `text` with its ASCII letters lowered."""
    lowered = text.translate(str.maketrans(string.ascii_uppercase, string.ascii_lowercase))
    return any(needle in lowered for needle in needles)


def test_a_view_with_no_sensitive_name_needs_no_earlier_step() -> None:
    restrictive = VisibilityPolicy(tool_types={ToolType.LLM: HIDDEN})

    assert view(sensitive_fields=()).learning_needles == frozenset()
    assert view(restrictive, sensitive_fields=()).learning_needles == frozenset()
    assert view(full_access=True).learning_needles == frozenset()


def test_a_sensitive_name_beyond_ascii_makes_every_earlier_step_count() -> None:
    assert view(sensitive_fields=["password", "Contraseña"]).learning_needles is None


def test_learning_needles_are_the_quoted_names_escapes_and_look_alike_letters() -> None:
    needles = view(sensitive_fields=["Password"]).learning_needles

    assert needles is not None
    assert {'"password', "'password", "\\u", "\u017f", "\u00df"} <= needles
    assert "\u212a" not in needles  # the Kelvin sign stands for "k", which "password" lacks


def test_every_character_standing_for_an_ascii_letter_is_a_learning_needle() -> None:
    # Casefolding (`ß` → "ss") or a case-insensitive regular expression (`ı` ~ "i") turns
    # these into ASCII letters, so a key may spell a sensitive name with them.
    ignoring_case = re.compile("(?i)[a-z]")
    standing_in = {
        char
        for char in map(chr, range(0x80, sys.maxunicode + 1))
        if not 0xD800 <= ord(char) < 0xE000
        and (
            any(c.isascii() and c.isalpha() for c in char.casefold())
            or ignoring_case.fullmatch(char)
        )
    }
    needles = view(sensitive_fields=[string.ascii_lowercase]).learning_needles

    assert needles is not None
    assert standing_in <= needles
    assert {"\u00df", "\u0131", "\u212a"} <= standing_in


@pytest.mark.parametrize(
    ("sensitive_fields", "stored"),
    [
        (["password"], call({"PassWord": SECRET})),
        (["password"], call({"raw": json.dumps({"in": json.dumps({"password": SECRET})})})),
        (["password"], call({"raw": '{"p\\u0061ssword": "' + SECRET + '"}'})),
        (["password"], result(f"Action Input: {{'PASSWORD': '{SECRET}'}}")),
        (["password"], call({"pa\u017fsword": SECRET})),
        (["password"], call({"pa\u00dfword": SECRET})),
        (["api_key"], call({"api_\u212aey": SECRET})),
        (["password", "api_key"], thinking(f'"password" and "ap\u0131_key": "{SECRET}"')),
        (["x-api-key"], result({"headers": {"X-API-KEY": SECRET}})),
        (["pass/word"], call({"raw": '{"PASS\\/WORD": "' + SECRET + '"}'})),
    ],
)
def test_a_step_the_view_learns_from_holds_one_of_its_learning_needles(
    sensitive_fields: list[str], stored: Stored
) -> None:
    reader = view(sensitive_fields=sensitive_fields)
    needles = reader.learning_needles
    assert needles is not None

    reader.learn(*stored)

    assert shown(reader, synthesis(f"it is {SECRET}"))["synthesis"]["conclusion"] == (
        f"it is {REDACTED}"
    )
    assert _holds(needles, stored[0])


@pytest.mark.parametrize(
    ("sensitive_fields", "stored"),
    [
        (["password"], thinking("I need the password, and the password_hint")),
        (["token"], result({"content": "hi"}, tool_type=ToolType.LLM, tool="llm")),
        (["api_key"], call({"apiXkey": SECRET, "api-key": SECRET})),
    ],
)
def test_a_step_without_a_learning_needle_teaches_the_view_nothing(
    sensitive_fields: list[str], stored: Stored
) -> None:
    reader = view(sensitive_fields=sensitive_fields)
    needles = reader.learning_needles
    assert needles is not None

    reader.learn(*stored)

    later = synthesis(f"it is {SECRET}")
    assert reader.render(*later) is later[0]
    assert not _holds(needles, stored[0])


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
