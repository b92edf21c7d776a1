"""`omniforge secrets rotate`: seals every tenant secret again under the first key of
`OMNIFORGE_SECRETS_KEY`, in-process on the configured database. The procedure: set
`OMNIFORGE_SECRETS_KEY=NEW,OLD` on every instance and deploy (the new key seals, both open),
run this command, then drop the old key."""

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from app.config import Settings

if TYPE_CHECKING:
    from app.resources.secrets import Rotation

EXIT_OK, EXIT_FAILED = 0, 1


def add_command(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    secrets = commands.add_parser("secrets", help="manage the keys of tenant secrets")
    verbs = secrets.add_subparsers(dest="secrets_command", required=True)
    rotate = verbs.add_parser(
        "rotate",
        help="seal every secret again under the first key of OMNIFORGE_SECRETS_KEY, so that "
        "the others can be dropped",
    )
    rotate.add_argument(
        "--batch-size",
        type=_positive,
        default=100,
        help="secrets sealed again per transaction (default: 100)",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Runs `omniforge secrets rotate`: the counts on stdout, each secret no configured key
    opens on stderr (then the status is 1: an old key was dropped too soon)."""
    rotation = asyncio.run(_rotate(settings, args.batch_size))
    print(
        f"sealing key {rotation.key_id}: {rotation.resealed} secrets sealed again in "
        f"{rotation.batches} batches; {len(rotation.unreadable)} no configured key opens"
    )
    for line in rotation.unreadable:
        print(f"omniforge: cannot open {line}", file=sys.stderr)
    return EXIT_FAILED if rotation.unreadable else EXIT_OK


async def _rotate(settings: Settings, batch_size: int) -> "Rotation":
    from app.resources.secrets import SecretVault
    from app.storage import Database, upgrade_to_head

    database = Database(settings.resolved_database_url())
    try:
        await upgrade_to_head(database)
        return await SecretVault.from_settings(database, settings).rotate(batch_size=batch_size)
    finally:
        await database.dispose()


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"not a positive whole number: {text!r}")
    return int(text)
