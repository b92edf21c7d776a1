"""Fails, naming each one, when a Python module under the given directories is longer than the
ceiling (600 lines): past it a module holds more than one job, and is split before it grows on.
Run by scripts/test; the standard library only.

Usage: python scripts/_ceiling.py [--max-lines N] DIRECTORY...
"""

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

MAX_LINES = 600


def line_count(path: Path) -> int:
    return len(path.read_bytes().splitlines())


def too_long(directories: Iterable[Path], max_lines: int = MAX_LINES) -> list[tuple[Path, int]]:
    """The modules longer than `max_lines`, longest first, with their lengths."""
    found = [
        (path, lines)
        for directory in directories
        for path in sorted(directory.rglob("*.py"))
        if (lines := line_count(path)) > max_lines
    ]
    return sorted(found, key=lambda item: (-item[1], str(item[0])))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/_ceiling.py", description=__doc__)
    parser.add_argument("directories", nargs="+", type=Path)
    parser.add_argument("--max-lines", type=int, default=MAX_LINES)
    args = parser.parse_args(argv)
    missing = [str(d) for d in args.directories if not d.is_dir()]
    if missing:
        parser.error(f"not a directory: {', '.join(missing)}")
    offenders = too_long(args.directories, args.max_lines)
    for path, lines in offenders:
        print(f"{path}: {lines} lines")
    if offenders:
        print(
            f"{len(offenders)} module(s) over {args.max_lines} lines: split each along a seam "
            "(what changes together stays together).",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
