"""What an MCP result becomes in a step: text joined, structured content as JSON, media as
metadata (images of a type models take also handed on as images); an error result's text is
what the failure says."""

import base64

import mcp_types as types

from app.tools.mcp.results import error_text, result_images, result_value
from app.tools.models import MAX_MODEL_IMAGE_BYTES, ModelImage


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def test_text_contents_are_joined() -> None:
    result = types.CallToolResult(content=[_text("one"), _text("two")])

    assert result_value(result) == "one\ntwo"


def test_structured_content_is_the_value() -> None:
    result = types.CallToolResult(content=[_text('{"sum": 3}')], structured_content={"sum": 3})

    assert result_value(result) == {"sum": 3}


def test_images_become_metadata_beside_the_text() -> None:
    png = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()
    result = types.CallToolResult(
        content=[
            _text("a chart"),
            types.ImageContent(type="image", data=png, mime_type="image/png"),
        ]
    )

    assert result_value(result) == {
        "text": "a chart",
        "content": [{"type": "image", "mime_type": "image/png", "size_bytes": 100}],
    }


def test_images_models_take_are_handed_on_and_others_are_not() -> None:
    png, tiff = b"\x89PNG" + b"\0" * 96, b"II*\0" + b"\0" * 20
    huge = b"\xff\xd8" + b"\0" * MAX_MODEL_IMAGE_BYTES

    def image(data: bytes | str, mime_type: str) -> types.ImageContent:
        encoded = data if isinstance(data, str) else base64.b64encode(data).decode()
        return types.ImageContent(type="image", data=encoded, mime_type=mime_type)

    result = types.CallToolResult(
        content=[
            _text("charts"),
            image(png, "image/png"),
            image(tiff, "image/tiff"),
            image(huge, "image/jpeg"),
            image("not base64!", "image/png"),
        ]
    )

    assert result_images(result) == (ModelImage("image/png", png),)


def test_resources_give_their_text_or_their_metadata() -> None:
    blob = base64.b64encode(b"12345").decode()
    result = types.CallToolResult(
        content=[
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///a.txt", text="inside"),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///b.bin", blob=blob, mime_type="application/octet-stream"
                ),
            ),
            types.ResourceLink(type="resource_link", uri="https://x.example/c", name="c"),
        ]
    )

    assert result_value(result) == {
        "text": "inside",
        "content": [
            {
                "type": "resource",
                "uri": "file:///b.bin",
                "mime_type": "application/octet-stream",
                "size_bytes": 5,
            },
            {"type": "resource_link", "uri": "https://x.example/c", "name": "c", "mime_type": None},
        ],
    }


def test_an_empty_result_is_empty_text() -> None:
    assert result_value(types.CallToolResult(content=[])) == ""


def test_an_error_result_says_what_its_text_says() -> None:
    result = types.CallToolResult(content=[_text("401 unauthorized")], is_error=True)

    assert error_text(result) == "401 unauthorized"
    assert error_text(types.CallToolResult(content=[], is_error=True)).startswith("the tool")
