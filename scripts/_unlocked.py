"""Prints the distributions installed in this interpreter's environment that a lock file does not
list, one per line: what `ensure_venv` (scripts/_venv.sh) removes so that a virtualenv holds what
the lock holds and nothing else. Run by the virtualenv's own Python; the standard library only.

Usage: python scripts/_unlocked.py requirements/test.lock
"""

import json
import re
import sys
from importlib import metadata

# The virtualenv's own installer, never listed by a lock.
_INSTALLER = {"pip", "setuptools", "wheel"}
_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==")


def canonical(name: str) -> str:
    """PEP 503's normalised name: `Foo_Bar.baz` and `foo-bar-baz` are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_names(lock_text: str) -> set[str]:
    return {canonical(m.group(1)) for line in lock_text.splitlines() if (m := _PINNED.match(line))}


def is_editable(dist: metadata.Distribution) -> bool:
    # Editable installs (the project, its client, the example plugin) are not the lock's business.
    direct_url = dist.read_text("direct_url.json")
    if not direct_url:
        return False
    return bool(json.loads(direct_url).get("dir_info", {}).get("editable", False))


def unlocked(lock_text: str) -> list[str]:
    locked = locked_names(lock_text)
    names = {
        canonical(dist.metadata["Name"])
        for dist in metadata.distributions()
        if dist.metadata["Name"] and not is_editable(dist)
    }
    return sorted(names - locked - _INSTALLER)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as lock:
        print("\n".join(unlocked(lock.read())))
