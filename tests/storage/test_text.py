"""Text the databases refuse is stored in one documented way: NUL as U+2400, lone surrogates
as U+FFFD; everything else, escaped or not, as it came."""

import json
from typing import Any

import pytest
from pydantic import BaseModel

from app.storage.text import (
    NUL_STAND_IN,
    SURROGATE_STAND_IN,
    dump_model,
    storable,
    storable_json,
)


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("plain", "plain"),
        ("a\x00b", f"a{NUL_STAND_IN}b"),
        ("\ud800", SURROGATE_STAND_IN),
        ("x\udfffy\x00", f"x{SURROGATE_STAND_IN}y{NUL_STAND_IN}"),
        ("emoji \U0001f600 and \t\n controls", "emoji \U0001f600 and \t\n controls"),
    ],
)
def test_storable_replaces_only_what_no_database_stores(text: str, stored: str) -> None:
    assert storable(text) == stored


@pytest.mark.parametrize(
    ("document", "stored"),
    [
        (r'"a\u0000b"', f'"a{NUL_STAND_IN}b"'),
        # A literal backslash before "u0000" is text, not an escape.
        (r'"a\\u0000b"', r'"a\\u0000b"'),
        (r'"a\\\u0000b"', f'"a\\\\{NUL_STAND_IN}b"'),
        # A pair stays a pair; a lone half of one, high or low, does not.
        (r'"\ud83d\ude00"', r'"\ud83d\ude00"'),
        (r'"\ud83dx"', f'"{SURROGATE_STAND_IN}x"'),
        (r'"\ude00"', f'"{SURROGATE_STAND_IN}"'),
        (r'"\ud83d\ud83d\ude00"', f'"{SURROGATE_STAND_IN}\\ud83d\\ude00"'),
        (r'"\u0001 stays"', r'"\u0001 stays"'),
    ],
)
def test_storable_json_replaces_escapes_the_databases_refuse(document: str, stored: str) -> None:
    assert storable_json(document) == stored
    json.loads(storable_json(document))  # still JSON


class _Step(BaseModel):
    text: str
    value: Any = None


def test_a_model_holding_a_lone_surrogate_is_dumped_with_it_replaced() -> None:
    step = _Step(text="a\ud800b\x00", value={"k\udc00": ["\x00", float("nan"), 1.5]})
    dumped = json.loads(dump_model(step))
    assert dumped == {
        "text": f"a{SURROGATE_STAND_IN}b{NUL_STAND_IN}",
        "value": {f"k{SURROGATE_STAND_IN}": [NUL_STAND_IN, None, 1.5]},
    }


def test_storing_twice_changes_nothing_more() -> None:
    once = dump_model(_Step(text="\x00\ud800"))
    assert storable_json(once) == once
