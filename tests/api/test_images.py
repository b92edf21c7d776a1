"""An image a tool hands on (read_file's) reaches a model that takes images as an image part
of the conversation, native tool calling or the text format alike; a model that does not take
images is told so and given none; no step, stream or chain read stores the image's bytes."""

import base64
import json
from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import pytest

from tests.api.helpers import stream, submit
from tests.factories import fake_deployment, write_model_list
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.resources.documents import make_image
from tests.service import MODEL, Service, checked, running_service, service_settings

VISION = "fake-vision"
VISION_TEXT = "fake-vision-text"  # takes images, but not tools: the text ReAct format
TOOLS = ["read_file"]


@pytest.fixture(scope="module")
async def seeing_service(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Service]:
    directory = tmp_path_factory.mktemp("seeing")
    (directory / "models").mkdir()
    async with FakeLLMServer() as llm:
        models = write_model_list(
            directory / "models",
            [
                fake_deployment(llm, MODEL, native_tools=True, vision=False),
                fake_deployment(llm, VISION, native_tools=True, vision=True),
                fake_deployment(llm, VISION_TEXT, native_tools=False, vision=True),
            ],
        )
        settings = service_settings(directory, database_url, llm, models_file=models)
        async with running_service(settings, llm) as service:
            yield service


@pytest.fixture
async def seeing(seeing_service: Service) -> AsyncIterator[Service]:
    """The service whose models take images or not, `checked` after each test."""
    async with checked(seeing_service) as service:
        yield service


async def _ask_about_an_image(
    service: Service, model: str, *, native: bool
) -> tuple[bytes, list[dict[str, Any]], str, dict[str, Any]]:
    """Runs a task on `model` in which the model reads an uploaded PNG; returns the PNG, the
    messages of the model's second request, what the task's readers get (stream, chain
    read, export) and the chain."""
    tenant = await service.create_tenant(f"img-{uuid4().hex[:12]}", enabled_tools=TOOLS)
    png = make_image(120, 80)
    async with service.client(tenant) as client:
        uploaded = await client.post(
            "/api/v1/files", files={"file": ("chart.png", png, "application/octet-stream")}
        )
        assert uploaded.status_code == 201, uploaded.text
        file_id = uploaded.json()["id"]
        read = (
            Reply.tool_calls([ToolCall("read_file", {"file_id": file_id}, id="r1")])
            if native
            else Reply.text(
                "Thought: I will look.\nAction: read_file\n"
                f"Action Input: {json.dumps({'file_id': file_id})}"
            )
        )
        answer = "A gradient, 120 by 80." if native else "Final Answer: A gradient, 120 by 80."
        service.fake_llm.script(model, read, Reply.text(answer))
        accepted = await submit(
            client, input="What is in the image?", model=model, tools=TOOLS, file_ids=[file_id]
        )
        events = await stream(client, accepted["task_id"])
        chain = (await client.get(f"/api/v1/chains/{accepted['chain_id']}")).json()
        exported = await client.get(f"/api/v1/chains/{accepted['chain_id']}/export")
    assert events[-1].json["final_state"] == "completed", events[-1].json
    assert exported.status_code == 200, exported.text
    second = service.fake_llm.requests_for(model)[-1].body["messages"]
    seen_by_readers = json.dumps([e.json for e in events]) + json.dumps(chain) + exported.text
    return png, second, seen_by_readers, chain


def _image_urls(messages: list[dict[str, Any]]) -> list[str]:
    return [
        part["image_url"]["url"]
        for message in messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


def _data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


@pytest.mark.parametrize(("model", "native"), [(VISION, True), (VISION_TEXT, False)])
async def test_a_model_that_takes_images_is_shown_the_image_read_file_returned(
    seeing: Service, model: str, native: bool
) -> None:
    png, messages, seen, chain = await _ask_about_an_image(seeing, model, native=native)
    # The image itself, exactly as uploaded (small enough to go as it is).
    assert _image_urls(messages) == [_data_url(png)]
    image_message = next(m for m in messages if isinstance(m.get("content"), list))
    assert image_message["role"] == "user"
    texts = [part["text"] for part in image_message["content"] if part["type"] == "text"]
    if native:
        # Tool messages hold text only: the image follows them in a user message.
        tool_message = next(m for m in messages if m["role"] == "tool")
        assert '"type": "image"' in tool_message["content"]
        assert "(The image follows.)" in tool_message["content"]
        assert messages.index(image_message) > messages.index(tool_message)
        assert texts == ["The image read_file returned:"]
    else:
        assert texts[0].startswith("Observation: ")
        assert "(The image follows.)" in texts[0]
    # No reader sees the image's bytes; the LLM call that was shown it records what it was.
    encoded = base64.b64encode(png).decode()
    assert encoded[:200] not in seen
    assert "base64," not in seen
    recorded = [
        step["tool_call"]["arguments"]
        for step in chain["steps"]
        if step["tool_call"] and step["tool_call"]["tool_type"] == "llm"
    ]
    assert f"[image/png image, {len(png):,} bytes, not stored]" in json.dumps(recorded[-1])


async def test_a_model_that_takes_no_images_is_told_so_and_given_none(seeing: Service) -> None:
    png, messages, seen, _ = await _ask_about_an_image(seeing, MODEL, native=True)
    assert _image_urls(messages) == []
    tool_message = next(m for m in messages if m["role"] == "tool")
    assert "this model does not take images" in tool_message["content"]
    assert '"width": 120' in tool_message["content"]
    assert base64.b64encode(png).decode()[:200] not in seen


async def test_the_model_list_says_which_models_take_images(seeing: Service) -> None:
    tenant = await seeing.create_tenant(f"img-{uuid4().hex[:12]}")
    async with seeing.client(tenant) as client:
        listed = (await client.get("/api/v1/models")).json()
    vision = {
        model["name"]: [d["supports_vision"] for d in model["deployments"]]
        for model in listed["items"]
    }
    assert vision == {MODEL: [False], VISION: [True], VISION_TEXT: [True], "demo": [False]}
