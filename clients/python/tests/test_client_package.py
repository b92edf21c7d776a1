"""The client is a package of its own: it imports without the service, and depends on httpx
and pydantic alone."""

import subprocess
import sys
import tomllib
from pathlib import Path

CLIENT = Path(__file__).parents[1]

# `app` made unimportable: any import of the service by the client fails loudly.
_IMPORT_WITHOUT_SERVICE = """
import sys
sys.modules["app"] = None
import omniforge_client
from omniforge_client import _async, _core, _sync, events, inputs, models
loaded = [n for n, m in sys.modules.items() if m is not None and n.split(".")[0] == "app"]
assert not loaded, loaded
print(omniforge_client.__version__)
"""


def test_the_client_imports_with_the_service_unimportable() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_WITHOUT_SERVICE],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0.1.0"


def test_the_distribution_depends_on_httpx_and_pydantic_only() -> None:
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]

    assert project["name"] == "omniforge-client"
    assert sorted(dep.split(">")[0] for dep in project["dependencies"]) == ["httpx", "pydantic"]
    assert (CLIENT / "omniforge_client" / "py.typed").exists()
