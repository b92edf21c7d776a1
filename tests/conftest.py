"""Shared fixtures: the scripted fake LLM server, verified after every test that uses it."""

import os
from collections.abc import AsyncIterator

import pytest

from tests.fakes.openai_server import FakeLLMServer


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLMServer]:
    """A fake OpenAI-compatible server on 127.0.0.1; unscripted or unused replies fail."""
    async with FakeLLMServer() as server:
        yield server
        server.verify()


def pytest_configure(config: pytest.Config) -> None:
    # Model lists in tests reference their key as `os.environ/FAKE_LLM_API_KEY`, like real ones.
    os.environ.setdefault("FAKE_LLM_API_KEY", "fake-key")
