"""Tenant secrets in storage, on both databases: set (new or replaced), listed by name,
deleted, each tenant seeing only its own; rows hold the sealed value, never the plaintext."""

import base64
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from sqlalchemy import text

from app.resources.secrets.store import SecretRepository
from app.security.secrets import KeyRing, Sealed
from app.storage import Database

KEY_A = bytes(range(32))
KEY_B = bytes(range(1, 33))
VALUE = "sk-live-51HxYzPlaintextValue"
T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    yield database
    await database.dispose()


@pytest.fixture
def tenant() -> str:
    return f"t-{uuid4().hex[:12]}"


async def _put(
    database: Database,
    tenant: str,
    name: str,
    value: str = VALUE,
    *,
    by: str = "alice",
    at: datetime = T0,
    ring: KeyRing | None = None,
) -> bool:
    sealed = (ring or KeyRing([KEY_A])).seal(value, tenant_id=tenant, name=name)
    async with database.transaction() as connection:
        _, created = await SecretRepository(connection, tenant).put(
            name, key_id=sealed.key_id, sealed=sealed.text, by=by, at=at
        )
    return created


async def test_a_secret_is_created_then_replaced_keeping_who_created_it(
    database: Database, tenant: str
) -> None:
    created = await _put(database, tenant, "TOKEN", "first", by="alice", at=T0)
    replaced = await _put(
        database, tenant, "TOKEN", "second", by="bob", at=T0 + timedelta(minutes=5)
    )

    async with database.read() as connection:
        record = await SecretRepository(connection, tenant).get("TOKEN")
    assert (created, replaced) == (True, False)
    assert record is not None
    assert (record.created_by, record.updated_by) == ("alice", "bob")
    assert (record.created_at, record.updated_at) == (T0, T0 + timedelta(minutes=5))
    opened = KeyRing([KEY_A]).open(
        Sealed(record.key_id, record.sealed), tenant_id=tenant, name="TOKEN"
    )
    assert opened == "second"


async def test_the_stored_row_holds_neither_the_plaintext_nor_its_base64(
    database: Database, tenant: str
) -> None:
    await _put(database, tenant, "STRIPE_KEY", VALUE)

    async with database.read() as connection:
        row = (
            await connection.execute(
                text("SELECT * FROM tenant_secrets WHERE tenant_id = :tenant"), {"tenant": tenant}
            )
        ).one()
    stored = " ".join(str(column) for column in row)
    assert "STRIPE_KEY" in stored
    for form in (VALUE, base64.b64encode(VALUE.encode()).decode(), VALUE.encode().hex()):
        assert form not in stored
    assert row._mapping["key_id"] == KeyRing([KEY_A]).sealing_key_id


async def test_each_tenant_sees_and_deletes_only_its_own_secrets(
    database: Database, tenant: str
) -> None:
    other = f"o-{uuid4().hex[:12]}"
    await _put(database, tenant, "TOKEN", "mine")
    await _put(database, other, "TOKEN", "theirs")
    await _put(database, other, "ONLY_THEIRS", "theirs")

    async with database.transaction() as connection:
        mine = SecretRepository(connection, tenant)
        names = [record.name for record in await mine.all()]
        missing = await mine.get("ONLY_THEIRS")
        deleted_theirs = await mine.delete("ONLY_THEIRS")
        deleted_mine = await mine.delete("TOKEN")
        again = await mine.delete("TOKEN")
    async with database.read() as connection:
        theirs = [record.name for record in await SecretRepository(connection, other).all()]

    assert names == ["TOKEN"]
    assert missing is None
    assert (deleted_theirs, deleted_mine, again) == (False, True, False)
    assert theirs == ["ONLY_THEIRS", "TOKEN"]


async def test_secrets_are_paged_by_name(database: Database, tenant: str) -> None:
    for name in ("c", "e", "b", "d", "a"):
        await _put(database, tenant, name)

    async with database.read() as connection:
        secrets = SecretRepository(connection, tenant)
        first = await secrets.page(after=None, limit=2)
        second = await secrets.page(after=first[1].name, limit=2)
        last = await secrets.page(after=second[1].name, limit=2)

    assert [r.name for r in first] == ["a", "b", "c"]
    assert [r.name for r in second] == ["c", "d", "e"]
    assert [r.name for r in last] == ["e"]


async def test_resealing_finds_the_other_keys_rows_and_leaves_a_changed_row_alone(
    database: Database, tenant: str
) -> None:
    old, new = KeyRing([KEY_A]), KeyRing([KEY_B, KEY_A])
    for name in ("ONE", "TWO", "THREE"):
        await _put(database, tenant, name, f"value of {name}", ring=old)
    await _put(database, tenant, "FOUR", "already new", ring=new)

    async with database.transaction() as connection:
        secrets = SecretRepository(connection, tenant)
        stale = await secrets.sealed_under_other_keys(new.sealing_key_id, after=None, limit=10)
        after_one = await secrets.sealed_under_other_keys(new.sealing_key_id, after="ONE", limit=1)
        again = new.seal("value of ONE", tenant_id=tenant, name="ONE")
        resealed = await secrets.reseal(
            "ONE", was=old.sealing_key_id, key_id=again.key_id, sealed=again.text
        )
        # Set meanwhile under another key than the one read: left alone.
        skipped = await secrets.reseal(
            "TWO", was=new.sealing_key_id, key_id=again.key_id, sealed=again.text
        )
        remaining = await secrets.sealed_under_other_keys(new.sealing_key_id, after=None, limit=10)
        one = await secrets.get("ONE")

    assert [r.name for r in stale] == ["ONE", "THREE", "TWO"]
    assert [r.name for r in after_one] == ["THREE"]
    assert (resealed, skipped) == (True, False)
    assert [r.name for r in remaining] == ["THREE", "TWO"]
    assert one is not None
    assert one.key_id == new.sealing_key_id
    assert new.open(Sealed(one.key_id, one.sealed), tenant_id=tenant, name="ONE") == (
        "value of ONE"
    )
