"""`omniforge secrets rotate`, run as an operator runs it during a key rotation: secrets sealed
under the old key are sealed again under the new one, after which the new key alone opens
every one; a secret no configured key opens is reported (by name, never by value)."""

import base64
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from app.resources.secrets import SecretVault
from app.resources.secrets.store import SecretRepository
from app.security.secrets import KeyRing, key_id_of
from app.storage import Database, upgrade_to_head
from app.storage.audit import AuditRepository
from app.storage.tables import tenant_secrets
from app.storage.tenants import TenantRepository
from app.tools.services import SecretUse
from tests.test_cli_agents import _omniforge_here

KEY_A = bytes(range(32))
KEY_B = bytes(range(50, 82))
KEY_C = bytes(range(90, 122))
T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
TENANTS = {
    "acme": {"GITHUB_TOKEN": "ghp_acme-value", "STRIPE_KEY": "sk_acme-value"},
    "globex": {"GITHUB_TOKEN": "ghp_globex-value", "DB_PASSWORD": "pw-globex-value"},
}


def _b64(*keys: bytes) -> str:
    return ",".join(base64.b64encode(key).decode() for key in keys)


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    """A database of its own: a rotation re-seals every tenant's secrets."""
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'rotation.db'}")
    await upgrade_to_head(database)
    async with database.transaction() as connection:
        for tenant in TENANTS:
            await TenantRepository(connection).create(tenant, tenant.title(), at=T0)
    yield database
    await database.dispose()


def _env(database: Database, tmp_path: Path, keys: str) -> dict[str, str]:
    return {
        "OMNIFORGE_DATA_DIR": str(tmp_path / "data"),
        "OMNIFORGE_DATABASE_URL": database.url.render_as_string(hide_password=False),
        "OMNIFORGE_SECRETS_KEY": keys,
    }


async def _seal_all(database: Database, ring: KeyRing) -> None:
    vault = SecretVault(database, ring, ttl_s=0)
    async with database.transaction() as connection:
        for tenant, secrets in TENANTS.items():
            for name, value in secrets.items():
                sealed = vault.seal(tenant, name, value)
                await SecretRepository(connection, tenant).put(
                    name, key_id=sealed.key_id, sealed=sealed.text, by="ops", at=T0
                )


async def _key_ids(database: Database) -> set[str]:
    async with database.read() as connection:
        return set((await connection.execute(select(tenant_secrets.c.key_id))).scalars())


async def test_the_documented_rotation_keeps_every_secret_readable_under_the_new_key(
    database: Database, tmp_path: Path
) -> None:
    await _seal_all(database, KeyRing([KEY_A]))
    assert await _key_ids(database) == {key_id_of(KEY_A)}

    # OMNIFORGE_SECRETS_KEY=NEW,OLD on every instance, then the command.
    code, out, err = await _omniforge_here(
        "secrets", "rotate", "--batch-size", "1", env=_env(database, tmp_path, _b64(KEY_B, KEY_A))
    )
    again = await _omniforge_here(
        "secrets", "rotate", env=_env(database, tmp_path, _b64(KEY_B, KEY_A))
    )

    assert (code, err) == (0, "")
    assert out == (
        f"sealing key {key_id_of(KEY_B)}: 4 secrets sealed again in 4 batches; "
        "0 no configured key opens\n"
    )
    assert again == (
        0,
        f"sealing key {key_id_of(KEY_B)}: 0 secrets sealed again in 0 batches; "
        "0 no configured key opens\n",
        "",
    )
    assert await _key_ids(database) == {key_id_of(KEY_B)}
    # Then the old key is dropped: the new one alone opens every secret.
    vault = SecretVault(database, KeyRing([KEY_B]), ttl_s=0)
    for tenant, secrets in TENANTS.items():
        resolver = await vault.resolver(tenant)
        assert {name: await resolver.resolve(name) for name in secrets} == secrets
    for value in (v for secrets in TENANTS.values() for v in secrets.values()):
        assert value not in out


async def test_a_secret_no_configured_key_opens_is_reported_and_left_as_it_was(
    database: Database, tmp_path: Path
) -> None:
    await _seal_all(database, KeyRing([KEY_A]))
    # The old key was dropped before the rotation ran: nothing can be sealed again.
    code, out, err = await _omniforge_here(
        "secrets", "rotate", env=_env(database, tmp_path, _b64(KEY_C, KEY_B))
    )

    assert code == 1
    assert out.startswith(f"sealing key {key_id_of(KEY_C)}: 0 secrets sealed again")
    lines = err.splitlines()
    assert len(lines) == 4
    assert lines[0] == (
        f"omniforge: cannot open acme/GITHUB_TOKEN: secret 'GITHUB_TOKEN' is sealed under key "
        f"{key_id_of(KEY_A)}, which is not configured (configured: {key_id_of(KEY_C)}, "
        f"{key_id_of(KEY_B)})"
    )
    assert await _key_ids(database) == {key_id_of(KEY_A)}
    for value in (v for secrets in TENANTS.values() for v in secrets.values()):
        assert value not in out + err


@pytest.mark.parametrize("command", [["secrets", "rotate"], ["serve", "--port", "0"]])
async def test_production_without_a_key_refuses_before_touching_anything(
    command: list[str], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    code, out, err = await _omniforge_here(
        *command,
        env={
            "OMNIFORGE_ENV": "production",
            "OMNIFORGE_DATA_DIR": str(data_dir),
            "OMNIFORGE_JWT_SECRET": "k" * 40,
        },
    )

    assert code == 2
    assert out == ""
    assert err.startswith("omniforge: configuration error: OMNIFORGE_SECRETS_KEY is required")
    assert not data_dir.exists()


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        (_b64(KEY_A)[:-2], "key 1 of OMNIFORGE_SECRETS_KEY is not base64"),
        (_b64(KEY_A, KEY_B[:20]), "key 2 of OMNIFORGE_SECRETS_KEY is 20 bytes, not 32"),
    ],
)
async def test_a_malformed_key_is_a_configuration_error_that_does_not_echo_it(
    keys: str, problem: str, tmp_path: Path
) -> None:
    code, _, err = await _omniforge_here(
        "secrets",
        "rotate",
        env={"OMNIFORGE_DATA_DIR": str(tmp_path), "OMNIFORGE_SECRETS_KEY": keys},
    )

    assert code == 2
    assert f"omniforge: configuration error: OMNIFORGE_SECRETS_KEY: {problem}" in err
    for key in keys.split(","):
        assert key not in err


async def test_a_batch_size_that_is_not_positive_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        await _omniforge_here("secrets", "rotate", "--batch-size", "0")
    assert exited.value.code == 2


async def test_scope_sets_who_may_use_a_secret_and_audits_it_as_the_operators_change(
    database: Database, tmp_path: Path
) -> None:
    await _seal_all(database, KeyRing([KEY_A]))
    env = _env(database, tmp_path, _b64(KEY_A))

    scoped = await _omniforge_here(
        "secrets", "scope", "acme", "GITHUB_TOKEN", "--roles", "tenant_admin",
        "--mcp-servers", "github,ci", env=env,
    )  # fmt: skip
    cleared = await _omniforge_here("secrets", "scope", "acme", "STRIPE_KEY", env=env)
    unknown = await _omniforge_here("secrets", "scope", "globex", "STRIPE_KEY", env=env)
    invalid = await _omniforge_here(
        "secrets", "scope", "acme", "GITHUB_TOKEN", "--agents", "a b", env=env
    )

    assert scoped[0] == 0, scoped
    assert json.loads(scoped[1]) == {
        "name": "GITHUB_TOKEN",
        "usable_by": {
            "agents": [],
            "roles": ["tenant_admin"],
            "tools": [],
            "mcp_servers": ["github", "ci"],
            "remote_agents": [],
        },
    }
    assert json.loads(cleared[1]) == {"name": "STRIPE_KEY", "usable_by": None}
    assert unknown == (2, "", "omniforge: tenant 'globex' has no secret 'STRIPE_KEY'\n")
    assert invalid[0] == 1
    assert invalid[2].startswith("omniforge: --agents.0: ")
    async with database.read() as connection:
        stored = await SecretRepository(connection, "acme").get("GITHUB_TOKEN")
        events = await AuditRepository(connection, "acme").page(limit=10)
    assert stored is not None
    assert stored.usable_by is not None
    assert stored.usable_by["mcp_servers"] == ["github", "ci"]
    # The value is untouched: it still opens.
    assert (
        await SecretVault(database, KeyRing([KEY_A]), ttl_s=0).value(
            "acme", "GITHUB_TOKEN", SecretUse("mcp_server", "github")
        )
        == TENANTS["acme"]["GITHUB_TOKEN"]
    )
    assert [(e.actor, e.action, e.resource_id) for e in events] == [
        ("omniforge-cli", "secret.scope", "STRIPE_KEY"),
        ("omniforge-cli", "secret.scope", "GITHUB_TOKEN"),
    ]
