"""The secret vault, on both databases: runs resolve their tenant's secrets from a short cache
that a change made here drops at once; a secret that does not open fails its call, not the
run; every value opened is masked in log lines; a rotation re-seals every secret under the
new key, batch by batch, so that the old key can go."""

import io
import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from uuid import uuid4

import pytest
from sqlalchemy import update

from app.chain import ErrorCode
from app.governance.tenants import ensure_default_tenant
from app.resources.secrets import SecretVault
from app.resources.secrets.store import SecretRepository
from app.security.log_masking import install_log_masking
from app.security.secrets import KeyRing, key_id_of
from app.storage import Database
from app.storage.tables import tenant_secrets
from app.storage.tenants import TenantRepository
from app.tools.errors import ToolError

KEY_A = bytes(range(32))
KEY_B = bytes(range(7, 39))
T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    yield database
    await database.dispose()


@pytest.fixture
async def tenant(database: Database) -> str:
    tenant_id = f"t-{uuid4().hex[:12]}"
    async with database.transaction() as connection:
        await TenantRepository(connection).create(tenant_id, "Secrets", at=T0)
    return tenant_id


async def _set(vault: SecretVault, database: Database, tenant: str, name: str, value: str) -> None:
    """As the API sets a secret: sealed, stored, then the vault told."""
    sealed = vault.seal(tenant, name, value)
    async with database.transaction() as connection:
        await SecretRepository(connection, tenant).put(
            name, key_id=sealed.key_id, sealed=sealed.text, by="alice", at=T0
        )
    vault.changed(tenant, value)


async def test_a_run_resolves_its_tenants_secrets_and_nothing_else(
    database: Database, tenant: str
) -> None:
    vault = SecretVault(database, KeyRing([KEY_A]), ttl_s=5)
    other = f"o-{uuid4().hex[:12]}"
    await _set(vault, database, tenant, "GITHUB_TOKEN", "ghp_tenant_value")
    await _set(vault, database, other, "OTHER_TOKEN", "ghp_other_value")

    resolver = await vault.resolver(tenant)

    assert await resolver.resolve("GITHUB_TOKEN") == "ghp_tenant_value"
    # It masks its own tenant's value, not another tenant's.
    assert resolver.mask("a ghp_tenant_value b ghp_other_value") == "a [secret] b ghp_other_value"
    assert await vault.value(tenant, "GITHUB_TOKEN") == "ghp_tenant_value"
    for name in ("OTHER_TOKEN", "MISSING"):
        with pytest.raises(ToolError) as raised:
            await resolver.resolve(name)
        assert raised.value.error_code is ErrorCode.SECRET_NOT_FOUND
        assert f"the secret {name!r} is not set for this tenant" in str(raised.value)
    with pytest.raises(ToolError):
        await vault.value(tenant, "OTHER_TOKEN")


async def test_a_change_through_this_vault_is_seen_at_once_another_after_the_ttl(
    database: Database, tenant: str
) -> None:
    clock = Clock()
    vault = SecretVault(database, KeyRing([KEY_A]), ttl_s=5, clock=clock)
    elsewhere = SecretVault(database, KeyRing([KEY_A]), ttl_s=5, clock=clock)
    await _set(vault, database, tenant, "TOKEN", "first-value")
    assert await vault.value(tenant, "TOKEN") == "first-value"
    # A run that began before a change keeps what it resolved.
    began = await vault.resolver(tenant)

    await _set(vault, database, tenant, "TOKEN", "second-value")
    seen_here = await vault.value(tenant, "TOKEN")
    await _set(elsewhere, database, tenant, "TOKEN", "third-value")  # another instance
    still_cached = await vault.value(tenant, "TOKEN")
    clock.now += 5.01
    after_ttl = await vault.value(tenant, "TOKEN")

    assert await began.resolve("TOKEN") == "first-value"
    assert (seen_here, still_cached, after_ttl) == ("second-value", "second-value", "third-value")


async def test_a_deleted_secret_is_not_found_by_runs_starting_after(
    database: Database, tenant: str
) -> None:
    vault = SecretVault(database, KeyRing([KEY_A]), ttl_s=60)
    await _set(vault, database, tenant, "TOKEN", "doomed-value")
    assert await vault.value(tenant, "TOKEN") == "doomed-value"

    async with database.transaction() as connection:
        await SecretRepository(connection, tenant).delete("TOKEN")
    vault.changed(tenant)

    with pytest.raises(ToolError, match="'TOKEN' is not set"):
        await vault.value(tenant, "TOKEN")


async def test_a_row_copied_to_another_name_fails_its_calls_and_the_others_still_resolve(
    database: Database, tenant: str, caplog: pytest.LogCaptureFixture
) -> None:
    vault = SecretVault(database, KeyRing([KEY_A]), ttl_s=0)
    await _set(vault, database, tenant, "GOOD", "good-value")
    await _set(vault, database, tenant, "COPY", "copy-value")
    async with database.transaction() as connection:
        good = await SecretRepository(connection, tenant).get("GOOD")
        assert good is not None
        await connection.execute(
            update(tenant_secrets)
            .where(tenant_secrets.c.tenant_id == tenant, tenant_secrets.c.name == "COPY")
            .values(sealed=good.sealed)
        )

    with caplog.at_level(logging.WARNING, logger="app.resources.secrets"):
        resolver = await vault.resolver(tenant)

    assert await resolver.resolve("GOOD") == "good-value"
    with pytest.raises(ToolError) as raised:
        await resolver.resolve("COPY")
    assert raised.value.error_code is ErrorCode.SECRET_NOT_FOUND
    assert "secret 'COPY' does not open" in str(raised.value)
    assert resolver.mask("good-value, COPY") == "[secret], COPY"
    assert "secret 'COPY' does not open" in caplog.text
    assert "good-value" not in caplog.text


@pytest.fixture
def log_lines() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logging.getLogger().addHandler(handler)
    try:
        yield logging.getLogger("tests.vault"), out
    finally:
        logging.getLogger().removeHandler(handler)


async def test_every_value_the_vault_opened_is_masked_in_log_lines(
    database: Database, tenant: str, log_lines: tuple[logging.Logger, io.StringIO]
) -> None:
    logger, out = log_lines
    writer = SecretVault(database, KeyRing([KEY_A]), ttl_s=5)
    await _set(writer, database, tenant, "API_KEY", "opened-by-a-run")
    vault = SecretVault(database, KeyRing([KEY_A]), ttl_s=5)
    uninstall = install_log_masking(vault.masker)
    try:
        logger.warning("before: %s", "opened-by-a-run")
        await vault.resolver(tenant)
        logger.warning("after: %s", "opened-by-a-run")
        await _set(vault, database, tenant, "NEW_KEY", "set-through-it")
        logger.warning("set: %s", "set-through-it")
    finally:
        uninstall()

    assert out.getvalue().splitlines() == [
        "before: opened-by-a-run",  # this process had not opened it yet
        "after: [secret]",
        "set: [secret]",
    ]


async def test_a_rotation_reseals_every_secret_so_that_the_old_key_can_go(
    database: Database, tenant: str
) -> None:
    await ensure_default_tenant(database)
    old = SecretVault(database, KeyRing([KEY_A]), ttl_s=5)
    values = {f"SECRET_{n}": f"value-number-{n}" for n in range(5)}
    for name, value in values.items():
        await _set(old, database, tenant, name, value)
    rotating = SecretVault(database, KeyRing([KEY_B, KEY_A]), ttl_s=5)
    await _set(rotating, database, tenant, "ALREADY_NEW", "sealed-under-b")

    rotation = await rotating.rotate(batch_size=2)
    again = await rotating.rotate(batch_size=2)

    assert rotation.key_id == key_id_of(KEY_B)
    # Other tenants of this database may hold secrets of other tests: count this one's.
    async with database.read() as connection:
        records = await SecretRepository(connection, tenant).all()
    assert {record.key_id for record in records} == {key_id_of(KEY_B)}
    assert rotation.resealed >= 5
    assert rotation.batches >= 3
    assert not [line for line in rotation.unreadable if line.startswith(f"{tenant}/")]
    assert again.resealed == 0
    after = SecretVault(database, KeyRing([KEY_B]), ttl_s=5)
    resolver = await after.resolver(tenant)
    for name, value in {**values, "ALREADY_NEW": "sealed-under-b"}.items():
        assert await resolver.resolve(name) == value


async def test_a_rotation_reports_secrets_no_key_opens_and_leaves_them(
    database: Database, tenant: str
) -> None:
    lost = SecretVault(database, KeyRing([KEY_A]), ttl_s=5)
    await _set(lost, database, tenant, "LOST", "sealed-under-a")
    only_b = SecretVault(database, KeyRing([KEY_B]), ttl_s=5)

    rotation = await only_b.rotate()

    mine = [line for line in rotation.unreadable if line.startswith(f"{tenant}/")]
    assert mine == [
        f"{tenant}/LOST: secret 'LOST' is sealed under key {key_id_of(KEY_A)}, which is not "
        f"configured (configured: {key_id_of(KEY_B)})"
    ]
    assert await lost.value(tenant, "LOST") == "sealed-under-a"
