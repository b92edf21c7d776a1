"""Images that tools hand on (`ToolResult.images`) as message parts for a model that takes
images, and messages as they are recorded and summarised: with each image's bytes left out
(a description stands in), so no step stores them."""

from collections.abc import Sequence
from typing import Any

from app.tools.results import ToolResult

Message = dict[str, Any]

IMAGE_FOLLOWS = "(The image follows.)"
IMAGE_NOT_SHOWN = "(The image itself is not shown: this model does not take images.)"


def image_parts(tool: str, result: ToolResult) -> list[dict[str, Any]]:
    """A result's images as the parts of a user message (after a line saying whose they
    are); none for a result without images."""
    if not result.images:
        return []
    count = len(result.images)
    heading = f"The image{'s' if count > 1 else ''} {tool} returned:"
    return [
        {"type": "text", "text": heading},
        *({"type": "image_url", "image_url": {"url": image.data_url}} for image in result.images),
    ]


def without_images(messages: Sequence[Message]) -> list[Message] | None:
    """`messages` with each image part that holds its bytes (a `data:` URL) replaced by a
    text part describing it; None when there is none (the messages are then as they are)."""
    changed = False
    recorded: list[Message] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(_holds_image(part) for part in content):
            changed = True
            parts = [_described(part) if _holds_image(part) else part for part in content]
            recorded.append({**message, "content": parts})
        else:
            recorded.append(message)
    return recorded if changed else None


def content_text(content: Any) -> str:
    """A message's content as text: its text parts, each image as a short description."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    texts = []
    for part in content:
        if _holds_image(part):
            texts.append(_described(part)["text"])
        elif isinstance(part, dict) and part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        else:
            texts.append(f"[{part.get('type', 'part') if isinstance(part, dict) else 'part'}]")
    return "\n".join(texts)


def _holds_image(part: Any) -> bool:
    if not isinstance(part, dict) or part.get("type") != "image_url":
        return False
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    return isinstance(url, str) and url.startswith("data:")


def _described(part: dict[str, Any]) -> dict[str, Any]:
    image = part["image_url"]
    url: str = image["url"] if isinstance(image, dict) else image
    header, _, data = url.partition(",")
    media_type = header.removeprefix("data:").split(";", 1)[0] or "image"
    size = len(data) * 3 // 4 - data[-2:].count("=")
    return {"type": "text", "text": f"[{media_type} image, {size:,} bytes, not stored]"}
