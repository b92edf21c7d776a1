"""Importing OmniForge, building the runtime and running the demo never reach for the network."""

import asyncio
import sys

# Runs in a fresh interpreter: an audit hook, installed before anything is imported, records
# every connection or name lookup that is not to this machine.
_PROBE = """
import sys
LOCAL = {None, "127.0.0.1", "::1", "localhost", b"localhost"}
attempts = []

def audit(event, args):
    if event == "socket.connect":
        address = args[1]
        host = address[0] if isinstance(address, tuple) else None
        if isinstance(address, tuple) and host not in LOCAL:
            attempts.append(f"connect {address!r}")
    elif event == "socket.getaddrinfo" and args[0] not in LOCAL:
        attempts.append(f"resolve {args[0]!r}")

sys.addaudithook(audit)
from app.cli import main
code = main(["run", "What is 17 * 23 + 4, and what time is it in Tokyo?"])
print("NETWORK", attempts)
sys.exit(code)
"""


async def test_import_start_up_and_a_demo_run_make_no_network_access() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _PROBE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    lines = out.decode().splitlines()

    assert process.returncode == 0, err.decode()
    assert "final answer   17 * 23 + 4 = 395. In Asia/Tokyo it is" in out.decode()
    assert lines[-1] == "NETWORK []"
