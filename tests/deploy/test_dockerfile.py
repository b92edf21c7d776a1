"""The Dockerfile installs from the locks, hash-checked, in a layer before the code is copied
(a code change rebuilds only the layers after it), and runs as a non-root user with a health
check."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def instructions() -> list[str]:
    text = (ROOT / "Dockerfile").read_text("utf-8")
    joined = re.sub(r"\\\n\s*", " ", text)
    lines = (" ".join(line.split()) for line in joined.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _index(predicate: str) -> int:
    lines = instructions()
    return next(i for i, line in enumerate(lines) if re.search(predicate, line))


def test_dependencies_come_from_the_locks_before_the_code() -> None:
    lock_copied = _index(r"^COPY requirements/runtime\.lock")
    installed = _index(r"--require-hashes --no-deps --requirement requirements/runtime\.lock")
    code_copied = _index(r"^COPY app ")
    project = _index(r"pip install .*--no-deps /tmp/wheels/omniforge-")
    assert lock_copied < installed < code_copied < project


def test_nothing_is_installed_outside_the_locks() -> None:
    for line in instructions():
        for command in re.findall(r"pip install[^&]*", line):
            assert "--no-deps" in command, command
            assert "--upgrade" not in command, command


def test_it_runs_as_a_non_root_user_with_a_health_check() -> None:
    lines = instructions()
    final_stage = lines[max(i for i, line in enumerate(lines) if line.startswith("FROM ")) :]
    (user,) = [line for line in final_stage if line.startswith("USER ")]
    assert user not in ("USER root", "USER 0", "USER 0:0")
    assert any("HEALTHCHECK" in line and "/readyz" in line for line in final_stage)
