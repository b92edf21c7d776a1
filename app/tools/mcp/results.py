"""What an MCP tool's result becomes in a step: its text joined, its structured content as
JSON, and what models cannot read in a step (images, audio, binary resources) as metadata;
its images are also handed on to a model that takes images."""

import base64
import binascii
from typing import Any

import mcp_types as types

from app.tools.models import MAX_MODEL_IMAGE_BYTES, MODEL_IMAGE_TYPES, ModelImage


def result_value(result: types.CallToolResult) -> Any:
    """The text alone when that is all there is, the structured content alone when the server
    gave one (its text is then the same content, serialized), else an object of the parts."""
    texts: list[str] = []
    media: list[dict[str, Any]] = []
    for block in result.content:
        match block:
            case types.TextContent():
                texts.append(block.text)
            case types.ImageContent() | types.AudioContent():
                media.append(
                    {
                        "type": block.type,
                        "mime_type": block.mime_type,
                        "size_bytes": _decoded_size(block.data),
                    }
                )
            case types.ResourceLink():
                media.append(
                    {
                        "type": "resource_link",
                        "uri": str(block.uri),
                        "name": block.name,
                        "mime_type": block.mime_type,
                    }
                )
            case types.EmbeddedResource():
                resource = block.resource
                if isinstance(resource, types.TextResourceContents):
                    texts.append(resource.text)
                else:
                    media.append(
                        {
                            "type": "resource",
                            "uri": str(resource.uri),
                            "mime_type": resource.mime_type,
                            "size_bytes": _decoded_size(resource.blob),
                        }
                    )
    parts: dict[str, Any] = {}
    if result.structured_content is not None:
        parts["structured"] = result.structured_content
    elif texts:
        parts["text"] = "\n".join(texts)
    if media:
        parts["content"] = media
    if not parts:
        return ""
    if list(parts) == ["text"]:
        return parts["text"]
    if list(parts) == ["structured"]:
        return parts["structured"]
    return parts


def result_images(result: types.CallToolResult) -> tuple[ModelImage, ...]:
    """The result's images of a type and size models take."""
    images = []
    for block in result.content:
        if isinstance(block, types.ImageContent) and block.mime_type in MODEL_IMAGE_TYPES:
            data = _decoded(block.data)
            if data is not None and len(data) <= MAX_MODEL_IMAGE_BYTES:
                images.append(ModelImage(block.mime_type, data))
    return tuple(images)


def error_text(result: types.CallToolResult) -> str:
    """What a result marked `isError` says."""
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    return "\n".join(texts).strip() or "the tool reported an error and said nothing more"


def _decoded_size(data: str) -> int | None:
    decoded = _decoded(data)
    return None if decoded is None else len(decoded)


def _decoded(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
