"""Secrets kept from a restricted reader: values under a sensitive key redacted wherever they
sit, and the values so learnt masked wherever a later step repeats them."""

import json

from app.chain import ReasoningStep, ToolType
from app.security.visibility import REDACTED, VisibilityPolicy
from tests.security.visibility_helpers import (
    HIDDEN,
    SECRET,
    SUMMARY,
    call,
    result,
    shown,
    synthesis,
    thinking,
    view,
)

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
