"""requirements/*.lock against pyproject.toml, offline: every dependency pinned (with hashes) at
a version its range allows, the runtime lock a subset of the test lock at the same versions, the
tests running on the locked versions, and what `ensure_venv` removes (scripts/_unlocked.py)."""

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "requirements"

# `name==version ; marker \` then `--hash=sha256:…` lines, as `uv pip compile` writes them.
_ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9][\w.-]*)(?:\[[^\]]*\])?==(?P<version>[^\s;\\]+)")


def parse_lock(text: str) -> dict[str, tuple[Requirement, frozenset[str]]]:
    """Each pinned distribution: its requirement line (marker included) and its hashes."""
    entries: dict[str, tuple[Requirement, frozenset[str]]] = {}
    for block in re.split(r"\n(?=\S)", text):
        first = block.split("\\", 1)[0].strip()
        if not _ENTRY.match(first):
            continue
        requirement = Requirement(first)
        hashes = frozenset(re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
        entries[canonicalize_name(requirement.name)] = (requirement, hashes)
    return entries


def not_locked(requirements: list[str], lock_text: str) -> list[str]:
    """The requirements a lock does not pin at a version they allow."""
    locked = parse_lock(lock_text)
    missing = []
    for line in requirements:
        wanted = Requirement(line)
        entry = locked.get(canonicalize_name(wanted.name))
        version = str(entry[0].specifier).removeprefix("==") if entry else None
        if version is None or not wanted.specifier.contains(version, prereleases=True):
            missing.append(f"{line} (locked: {version})")
    return missing


def pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def lock(name: str) -> str:
    return (LOCKS / f"{name}.lock").read_text(encoding="utf-8")


def _dependencies() -> list[str]:
    return list(pyproject()["project"]["dependencies"])  # type: ignore[index]


def _test_extra() -> list[str]:
    return list(pyproject()["project"]["optional-dependencies"]["test"])  # type: ignore[index]


def _build_requires() -> list[str]:
    return list(pyproject()["build-system"]["requires"])  # type: ignore[index]


@pytest.mark.parametrize(
    ("lock_name", "requirements"),
    [
        ("runtime", _dependencies()),
        ("test", _dependencies() + _test_extra()),
        ("build", _build_requires()),
    ],
)
def test_every_dependency_of_pyproject_is_locked(lock_name: str, requirements: list[str]) -> None:
    assert not_locked(requirements, lock(lock_name)) == [], "run scripts/lock"


def test_a_dependency_missing_from_the_lock_or_outside_its_range_is_named() -> None:
    text = lock("runtime")
    assert not_locked(["omniforge-no-such-package>=1"], text) == [
        "omniforge-no-such-package>=1 (locked: None)"
    ]
    locked_fastapi = str(parse_lock(text)["fastapi"][0].specifier).removeprefix("==")
    assert not_locked([f"fastapi>{locked_fastapi}"], text) == [
        f"fastapi>{locked_fastapi} (locked: {locked_fastapi})"
    ]


@pytest.mark.parametrize("lock_name", ["runtime", "test", "build"])
def test_every_locked_version_is_pinned_with_hashes(lock_name: str) -> None:
    entries = parse_lock(lock(lock_name))
    assert entries
    for name, (requirement, hashes) in entries.items():
        assert str(requirement.specifier).startswith("=="), name
        assert hashes, f"{name} has no --hash: pip --require-hashes would refuse the lock"


@pytest.mark.parametrize("lock_name", ["runtime", "build"])
def test_the_other_locks_pin_what_the_test_lock_pins(lock_name: str) -> None:
    # The image runs what the tests ran: same versions, same files.
    test = parse_lock(lock("test"))
    for name, (requirement, hashes) in parse_lock(lock(lock_name)).items():
        if lock_name == "build" and name not in test:
            continue  # the build backend alone (hatchling and its own needs)
        assert str(test[name][0].specifier) == str(requirement.specifier), name
        assert test[name][1] == hashes, name


def test_the_tests_run_on_the_locked_versions() -> None:
    differ = {}
    for name, (requirement, _) in parse_lock(lock("test")).items():
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue  # for another platform or Python
        locked = str(requirement.specifier).removeprefix("==")
        try:
            installed: str | None = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed != locked:
            differ[name] = (locked, installed)
    assert differ == {}, "(locked, installed): run scripts/test, which syncs the virtualenv"


def _unlocked(lock_text: str, directory: Path) -> set[str]:
    path = directory / "some.lock"
    path.write_text(lock_text, encoding="utf-8")
    script = ROOT / "scripts" / "_unlocked.py"
    result = subprocess.run(
        [sys.executable, str(script), str(path)], capture_output=True, text=True, check=True
    )
    return set(result.stdout.split())


def test_what_a_lock_does_not_list_is_named_for_removal_but_not_editables_or_pip(
    tmp_path: Path,
) -> None:
    nothing_locked = _unlocked("# empty\n", tmp_path)
    assert {"pytest", "fastapi"} <= nothing_locked
    assert not {"omniforge", "pip"} & nothing_locked  # the project (editable), the installer

    pytest_locked = _unlocked("PyTest==9.0.0 \\\n    --hash=sha256:" + "0" * 64 + "\n", tmp_path)
    assert "pytest" not in pytest_locked
    assert "fastapi" in pytest_locked


def test_the_virtualenv_holds_nothing_the_test_lock_does_not_list(tmp_path: Path) -> None:
    assert _unlocked(lock("test"), tmp_path) == set(), "run scripts/test, which syncs it"
