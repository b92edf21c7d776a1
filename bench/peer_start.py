"""Start-up beside the peer, in each round of `scripts/bench peer`: spawn -> the first 200 of
the readiness endpoint, each server pinned to the CPU it is loaded on.

- `omniforge serve` as a user runs it (the virtualenv's console script), on its embedded
  default (SQLite in a fresh data directory) with the round's model list (the fake model);
- `langgraph dev --no-browser --no-reload` on the round's ReAct project (`ChatOpenAI` and two
  tools), its persisted state removed first.

Readiness is asked every `PROBE_EVERY_S` (`bench.server_start`): it is the servers' own
readiness signal, and the peer offers no other.
"""

import os
import shutil
from pathlib import Path

from bench import langgraph_peer
from bench.server_start import Start, start_server
from bench.startup import omniforge_command, our_env

OURS = "omniforge serve"
THEIRS = "langgraph dev"


def ours(directory: Path, models_file: str, default_model: str, cpu: int) -> Start:
    data = directory / "serve-data"
    env = {
        **our_env(data),
        "OMNIFORGE_MODELS_FILE": models_file,
        "OMNIFORGE_DEFAULT_MODEL": default_model,
    }
    command = ["taskset", "-c", str(cpu), omniforge_command(), "serve", "--port"]
    return start_server(command, env, data, "/readyz")


def theirs(project: Path, env: dict[str, str], cpu: int) -> Start:
    shutil.rmtree(project / ".langgraph_api", ignore_errors=True)
    langgraph = langgraph_peer.install()
    command = ["taskset", "-c", str(cpu), str(langgraph), "dev", "--no-browser", "--no-reload"]
    return start_server([*command, "--port"], {**os.environ, **env}, project, "/ok")
