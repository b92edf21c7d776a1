"""Secret values masked in every form a text commonly carries them: any case, JSON and URL
escapes, base64 (standard and URL-safe, at any alignment within a longer encoding) and hex."""

import base64
import json
import time
from urllib.parse import quote, quote_plus

import pytest

from app.security.log_masking import SecretMasker
from app.security.redaction import Redactor

SECRET = "Mixed-Case_T0ken/with+Symbols=é"
HEADER = f"Bearer {SECRET}"


@pytest.fixture
def redactor() -> Redactor:
    return Redactor([SECRET], mask="[secret]", min_chars=4)


def _b64(text: str, *, url_safe: bool = False) -> str:
    encode = base64.urlsafe_b64encode if url_safe else base64.b64encode
    return encode(text.encode()).decode()


ECHOES = {
    "as given": SECRET,
    "upper-cased": SECRET.upper(),
    "lower-cased": SECRET.lower(),
    "any case": SECRET.swapcase(),
    "JSON-escaped": json.dumps({"authorization": HEADER}),
    "JSON-escaped, ASCII only": json.dumps({"a": SECRET}, ensure_ascii=True),
    "JSON-escaped twice": json.dumps(json.dumps({"a": SECRET})),
    "slashes escaped": json.dumps(SECRET).replace("/", "\\/"),
    "URL-encoded": quote(SECRET, safe=""),
    "URL-encoded with +": quote_plus(f"q {SECRET} r"),
    "URL-encoded, upper-cased": quote(SECRET.upper(), safe="").lower(),
    "base64 of the header": _b64(HEADER),
    "base64 of the upper-cased header": _b64(HEADER.upper()),
    "base64 of the lower-cased header": _b64(HEADER.lower()),
    "URL-safe base64, one byte in": _b64("x" + HEADER, url_safe=True),
    "base64, two bytes in": _b64("xy" + HEADER + "z"),
    "base64 without padding": _b64(HEADER).rstrip("="),
    "hex": HEADER.encode().hex(),
    "hex, upper-cased": HEADER.upper().encode().hex().upper(),
}


@pytest.mark.parametrize("form", ECHOES)
def test_every_common_form_of_a_value_is_masked(redactor: Redactor, form: str) -> None:
    echoed = f"the server said: {ECHOES[form]} (end)"

    masked = redactor(echoed)

    assert "[secret]" in masked
    assert masked.startswith("the server said: ")
    assert masked.endswith(" (end)")
    # What is left of an encoded form decodes to no part of the value longer than a few
    # characters: the mask replaced the encoding of all the rest.
    for left in masked.split("[secret]"):
        assert SECRET.lower()[2:-2] not in left.lower()


def test_text_without_the_value_is_left_as_it_is(redactor: Redactor) -> None:
    text = 'Bearer other-token {"a": "Mixed-Case"} aGVsbG8gd29ybGQ= 48656c6c6f'

    assert redactor(text) is text


def test_a_short_value_is_masked_alone_but_not_its_encodings() -> None:
    redactor = Redactor(["abcd"], mask="*", min_chars=4)

    assert redactor("x ABCD y") == "x * y"
    # Its base64 would be 5 or 6 characters: found in any text by chance.
    assert redactor("YWJjZA== YWJjZA") == "YWJjZA== YWJjZA"
    assert redactor("hex 61626364") == "hex *"


def test_a_value_shorter_than_the_minimum_is_not_masked() -> None:
    assert not Redactor(["abc"], mask="*", min_chars=4)
    assert Redactor(["abc"], mask="*", min_chars=4)("abc") == "abc"


def test_a_longer_value_containing_another_is_masked_whole() -> None:
    redactor = Redactor(["abcd", "xxabcdxx"], mask="*", min_chars=4)

    assert redactor("1 XXABCDXX 2 abcd") == "1 * 2 *"


def test_text_whose_lower_case_changes_length_is_still_masked() -> None:
    redactor = Redactor([SECRET], mask="*", min_chars=4)

    # "İ" lower-cases to two characters: the text is matched by case folding instead.
    assert redactor(f"İ {SECRET.upper()} İ") == "İ * İ"


def test_structured_values_are_masked_in_keys_and_values(redactor: Redactor) -> None:
    value = {"headers": {"x": [SECRET.upper(), 3, None]}, SECRET: True}

    assert redactor.value(value) == {"headers": {"x": ["[secret]", 3, None]}, "[secret]": True}


def test_the_log_masker_masks_every_form_of_what_it_learnt_in_batches() -> None:
    masker = SecretMasker("[secret]", min_chars=4)
    others = [f"other-secret-{n:04d}" for n in range(50)]
    for value in [*others, SECRET]:  # one batch each, merged as they grow
        masker.learn([value])

    masked = masker(f"a {SECRET.upper()} b {_b64(HEADER)} c {others[3].upper()} d")

    assert masked.startswith("a [secret] b QmVhcmVy")  # "Bearer " stays, the rest is masked
    assert masked.endswith("[secret] c [secret] d")
    assert masker(" ".join(others)) == " ".join(["[secret]"] * len(others))


def test_masking_is_fast_and_built_once_per_set_of_values() -> None:
    values = [f"tenant-secret-{n:03d}-{'x' * 20}" for n in range(50)]
    started = time.perf_counter()
    redactor = Redactor(values, mask="*", min_chars=4)
    built_s = time.perf_counter() - started
    text = "a log line with nothing secret in it, 1234 abcd " * 200  # ~10 KB
    started = time.perf_counter()
    for _ in range(100):
        assert redactor(text) == text
    per_text_s = (time.perf_counter() - started) / 100

    # Generous bounds for a shared machine; measured ~0.1 s and ~1 ms.
    assert built_s < 2.0
    assert per_text_s < 0.02
