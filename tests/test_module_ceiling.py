"""The module ceiling scripts/test checks (scripts/_ceiling.py): a module over 600 lines fails
the check, named with its length; one at the ceiling passes."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "_ceiling.py"


def _module(path: Path, lines: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"x{n} = {n}\n" for n in range(lines)), encoding="utf-8")


def _ceiling(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_module_over_the_ceiling_fails_the_check_and_is_named_with_its_length(
    tmp_path: Path,
) -> None:
    _module(tmp_path / "app" / "small.py", 10)
    _module(tmp_path / "app" / "at_the_ceiling.py", 600)
    _module(tmp_path / "app" / "nested" / "package" / "long.py", 601)
    _module(tmp_path / "bench" / "longer.py", 750)

    result = _ceiling("app", "bench", cwd=tmp_path)

    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "bench/longer.py: 750 lines",
        "app/nested/package/long.py: 601 lines",
    ]
    assert "2 module(s) over 600 lines" in result.stderr


def test_modules_at_or_under_the_ceiling_pass(tmp_path: Path) -> None:
    _module(tmp_path / "app" / "at_the_ceiling.py", 600)
    _module(tmp_path / "app" / "notes.txt", 2000)  # not a Python module

    result = _ceiling("app", cwd=tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_the_ceiling_can_be_set_lower(tmp_path: Path) -> None:
    _module(tmp_path / "app" / "module.py", 120)

    result = _ceiling("--max-lines", "100", "app", cwd=tmp_path)

    assert result.returncode == 1
    assert result.stdout.splitlines() == ["app/module.py: 120 lines"]


def test_a_directory_that_does_not_exist_is_an_error_not_a_pass(tmp_path: Path) -> None:
    result = _ceiling("app", cwd=tmp_path)

    assert result.returncode == 2
    assert "not a directory: app" in result.stderr
