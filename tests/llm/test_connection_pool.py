"""`OMNIFORGE_LLM_MAX_CONNECTIONS` sizes the connection pool LiteLLM builds for its calls: it is
read before LiteLLM is imported, however the process starts."""

import asyncio
import sys

from app.config import Settings
from app.llm import litellm_env

# Runs in a fresh interpreter: loads LiteLLM as every process does (through the one module
# that imports it, as a gateway's LiteLLM side does), then builds the aiohttp session LiteLLM
# sends every async call (OpenAI SDK path included) through.
_PROBE = """
import asyncio
import app.cli
import app.llm.litellm_env

from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

async def main():
    transport = AsyncHTTPHandler.create_aiohttp_transport()
    connector = transport.get_valid_client_session().connector
    print("POOL", connector.limit, connector.limit_per_host)
    await transport.aclose()

asyncio.run(main())
"""


async def _pool_of_a_process(**env: str) -> tuple[int, int]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _PROBE,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    _, limit, per_host = out.decode().split()
    return int(limit), int(per_host)


async def test_the_setting_sizes_litellms_pool_in_all_and_per_host() -> None:
    assert await _pool_of_a_process(OMNIFORGE_LLM_MAX_CONNECTIONS="1234") == (1234, 1234)


async def test_unset_the_pool_has_the_settings_default_not_litellms() -> None:
    default = Settings.model_fields["llm_max_connections"].default

    assert await _pool_of_a_process() == (default, default)
    assert default == litellm_env.DEFAULT_MAX_CONNECTIONS
    assert default > 10_000  # LiteLLM's own: 500 per host, 1,000 in all
