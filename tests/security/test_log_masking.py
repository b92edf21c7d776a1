"""Secret values kept out of log lines: whatever a handler writes (message, arguments,
exception, stack) shows the mask where a known value was."""

import io
import json
import logging
from collections.abc import Iterator

import pytest

from app.security.log_masking import SecretMasker, install_log_masking

TOKEN = "tok-8f3a9c1e"
QUOTED = 'pa"ss\\word\n2'


@pytest.fixture
def masker() -> SecretMasker:
    masker = SecretMasker("[secret]", min_chars=4)
    masker.learn([TOKEN, QUOTED, "abc"])
    return masker


@pytest.fixture
def written(masker: SecretMasker) -> Iterator[io.StringIO]:
    """What a handler of the root logger writes, with masking installed after it."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    uninstall = install_log_masking(masker)
    try:
        yield out
    finally:
        uninstall()
        root.removeHandler(handler)


def test_the_masker_masks_plain_and_json_escaped_forms(masker: SecretMasker) -> None:
    text = f"a={TOKEN} b={json.dumps({'v': QUOTED})} c={QUOTED} short=abc"

    masked = masker(text)

    assert masked == 'a=[secret] b={"v": "[secret]"} c=[secret] short=abc'


def test_a_value_containing_another_is_masked_whole() -> None:
    masker = SecretMasker("[secret]", min_chars=4)
    masker.learn(["abcd", "xxabcdxx"])

    assert masker("1 xxabcdxx 2 abcd") == "1 [secret] 2 [secret]"


def test_a_masker_with_nothing_learnt_changes_nothing() -> None:
    assert SecretMasker("[secret]", min_chars=4)("tok-8f3a9c1e") == "tok-8f3a9c1e"


def test_messages_and_their_arguments_are_masked(written: io.StringIO) -> None:
    logger = logging.getLogger("tests.masking")
    # Not a `Bearer` value: that is masked as a credential by whichever masking sees it first.
    logger.warning("calling with %s and %r", TOKEN, {"auth": f"token {TOKEN}"})
    logger.error(f"inline {TOKEN}")

    lines = written.getvalue().splitlines()
    assert lines == [
        "WARNING calling with [secret] and {'auth': 'token [secret]'}",
        "ERROR inline [secret]",
    ]


def test_exceptions_and_stacks_are_masked(written: io.StringIO) -> None:
    logger = logging.getLogger("tests.masking")
    try:
        raise RuntimeError(f"server refused {TOKEN}")
    except RuntimeError:
        logger.exception("call failed")
    logger.warning("here", stack_info=True, extra={"unused": TOKEN})

    text = written.getvalue()
    assert "RuntimeError: server refused [secret]" in text
    assert "Stack (most recent call last)" in text
    assert TOKEN not in text


def test_values_learnt_after_installation_are_masked(
    masker: SecretMasker, written: io.StringIO
) -> None:
    later = "later-value-42"
    masker.learn([later])

    logging.getLogger("tests.masking").warning("got %s", later)

    assert written.getvalue() == "WARNING got [secret]\n"


def test_uninstalling_leaves_the_handlers_as_they_were(masker: SecretMasker) -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logging.getLogger().addHandler(handler)
    try:
        install_log_masking(masker)()
        logging.getLogger("tests.masking").warning(TOKEN)
    finally:
        logging.getLogger().removeHandler(handler)
    assert handler.filters == []
    assert out.getvalue() == f"{TOKEN}\n"


def test_formatters_that_read_the_arguments_still_get_them_masked(masker: SecretMasker) -> None:
    """uvicorn's access formatter unpacks `record.args` itself: the filter keeps them, masked."""
    from uvicorn.logging import AccessFormatter

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s'))
    access = logging.getLogger("uvicorn.access")
    level = access.level
    access.setLevel(logging.INFO)
    access.addHandler(handler)
    uninstall = install_log_masking(masker, loggers=("uvicorn.access",))
    try:
        access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET", f"/x?t={TOKEN}", "1.1", 200)
    finally:
        uninstall()
        access.removeHandler(handler)
        access.setLevel(level)
    assert out.getvalue() == '127.0.0.1:5000 - "GET /x?t=[secret] HTTP/1.1" 200 OK\n'


def test_arguments_of_any_type_are_masked_and_numbers_keep_their_format(
    written: io.StringIO,
) -> None:
    logging.getLogger("app.test").warning("%d calls failed: %s", 3, ValueError(f"bad {TOKEN}"))
    assert written.getvalue() == "WARNING 3 calls failed: bad [secret]\n"
