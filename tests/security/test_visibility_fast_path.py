"""The work a view skips: steps with nothing sensitive are served as stored without parsing, and
only earlier steps holding one of its learning needles are learnt from."""

import json
import re
import string
import sys

import pytest

from app.chain import ToolType
from app.security.visibility import REDACTED, VisibilityPolicy
from tests.security.visibility_helpers import (
    HIDDEN,
    SECRET,
    Stored,
    call,
    facts,
    result,
    shown,
    synthesis,
    thinking,
    view,
)

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
