"""Images handed on by tools: as message parts, and left out of what is recorded and
summarised."""

import base64
from typing import Any

from app.agents.compaction import _render
from app.agents.images import content_text, without_images

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
DATA_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
DESCRIBED = f"[image/png image, {len(PNG):,} bytes, not stored]"


def _with_image(url: str = DATA_URL) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": "The image read_file returned:"},
            {"type": "image_url", "image_url": {"url": url}},
        ],
    }


def test_messages_without_images_are_recorded_as_they_are() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "tool", "content": "3"}]
    assert without_images(messages) is None


def test_an_images_bytes_are_replaced_by_its_description() -> None:
    plain = {"role": "user", "content": "look"}
    recorded = without_images([plain, _with_image()])
    assert recorded is not None
    assert recorded[0] is plain
    assert recorded[1]["content"] == [
        {"type": "text", "text": "The image read_file returned:"},
        {"type": "text", "text": DESCRIBED},
    ]
    assert "base64" not in str(recorded)


def test_an_image_by_address_holds_no_bytes_and_is_kept() -> None:
    linked = _with_image("https://images.example/chart.png")
    assert without_images([linked]) is None


def test_a_summary_is_given_an_images_description_not_its_bytes() -> None:
    assert content_text(_with_image()["content"]) == f"The image read_file returned:\n{DESCRIBED}"
    rendered = _render(_with_image())
    assert rendered == f"User: The image read_file returned:\n{DESCRIBED}"
