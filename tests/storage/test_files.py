"""Files in storage: one contract for both byte stores, tenant-scoped metadata and text, and
full-text search with each database's own engine (ranked, with snippets, safe for any query)."""

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

import pytest
from sqlalchemy import text

from app.storage import Database
from app.storage.files import (
    DatabaseFileStore,
    DirectoryFileStore,
    FileRepository,
    FileStore,
    fts5_query,
)
from app.storage.pagination import Cursor
from app.storage.records import FileRecord, FileTextRecord
from app.storage.tables import FILE_SEARCH_INDEX, described


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    yield database
    await database.dispose()


def _record(tenant: str, name: str = "notes.txt", *, at: datetime | None = None) -> FileRecord:
    return FileRecord(
        id=uuid4(),
        tenant_id=tenant,
        name=name,
        media_type="text/plain",
        size_bytes=10,
        sha256="0" * 64,
        text_chars=10,
        created_by="alice",
        created_at=at or datetime.now(UTC),
    )


async def _store_file(
    database: Database, tenant: str, *chunks: str, name: str = "notes.txt", page: int | None = None
) -> FileRecord:
    record = _record(tenant, name)
    async with database.transaction() as connection:
        await FileRepository(connection, tenant).insert(
            record, [FileTextRecord(page=page, text=chunk) for chunk in chunks]
        )
    return record


async def _search(database: Database, tenant: str, query: str, limit: int = 10) -> list[str]:
    async with database.read() as connection:
        hits = await FileRepository(connection, tenant).search(query, limit=limit)
    return [hit.file.name for hit in hits]


# The byte stores' shared contract.

StoreFactory = Callable[[Database, Path], FileStore]
STORES: dict[str, StoreFactory] = {
    "database": lambda database, _: DatabaseFileStore(database),
    "directory": lambda _, directory: DirectoryFileStore(directory / "files"),
}


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest, database: Database, tmp_path: Path) -> FileStore:
    return STORES[request.param](database, tmp_path)


async def test_a_store_gives_back_what_it_was_given_and_forgets_what_is_deleted(
    store: FileStore,
) -> None:
    key = uuid4().hex
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value
    assert await store.get(key) is None
    await store.put(key, data)
    assert await store.get(key) == data
    await store.put(key, b"replaced")
    assert await store.get(key) == b"replaced"
    await store.put(key, b"")
    assert await store.get(key) == b""
    await store.delete(key)
    assert await store.get(key) is None
    await store.delete(key)  # deleting what is gone is no error


async def test_a_store_keeps_keys_apart(store: FileStore) -> None:
    first, second = uuid4().hex, uuid4().hex
    await store.put(first, b"one")
    await store.put(second, b"two")
    await store.delete(first)
    assert await store.get(second) == b"two"


@pytest.mark.parametrize("key", ["", "../escape", "a/b", "a.b", "x" * 129, "nul\x00"])
async def test_a_store_refuses_keys_that_could_name_another_place(
    store: FileStore, key: str
) -> None:
    with pytest.raises(ValueError, match="not a file store key"):
        await store.put(key, b"data")
    with pytest.raises(ValueError, match="not a file store key"):
        await store.get(key)


async def test_the_directory_store_writes_under_its_root_only(tmp_path: Path) -> None:
    store = DirectoryFileStore(tmp_path / "root")
    key = uuid4().hex
    await store.put(key, b"bytes")
    written = await asyncio.to_thread(lambda: [p for p in tmp_path.rglob("*") if p.is_file()])
    assert written == [tmp_path / "root" / key[:2] / key]


# Metadata and text.


async def test_files_are_scoped_to_their_tenant(database: Database) -> None:
    tenant, other = f"t-{uuid4().hex[:8]}", f"o-{uuid4().hex[:8]}"
    record = await _store_file(database, tenant, "hello world")
    async with database.read() as connection:
        mine, theirs = FileRepository(connection, tenant), FileRepository(connection, other)
        assert await mine.get(record.id) == record
        assert await theirs.get(record.id) is None
        assert await theirs.get_many([record.id]) == []
        assert await theirs.texts(record.id) == []
        assert (await theirs.page(cursor=None, limit=10)).items == []
    async with database.transaction() as connection:
        assert await FileRepository(connection, other).delete(record.id) is None
    async with database.read() as connection:
        assert await FileRepository(connection, tenant).get(record.id) == record


async def test_a_repository_stores_only_its_own_tenants_files(database: Database) -> None:
    async with database.transaction() as connection:
        with pytest.raises(ValueError, match="its own tenant"):
            await FileRepository(connection, "one").insert(_record("two"), [])


async def test_files_are_listed_newest_first_page_by_page(database: Database) -> None:
    tenant = f"t-{uuid4().hex[:8]}"
    start = datetime.now(UTC)
    records = [_record(tenant, f"f{i}.txt", at=start + timedelta(seconds=i)) for i in range(5)]
    async with database.transaction() as connection:
        for record in records:
            await FileRepository(connection, tenant).insert(record, [])
    names: list[str] = []
    cursor = None
    async with database.read() as connection:
        while True:
            page = await FileRepository(connection, tenant).page(cursor=cursor, limit=2)
            names += [item.name for item in page.items]
            if page.next_cursor is None:
                break
            cursor = Cursor.decode(page.next_cursor)
    assert names == ["f4.txt", "f3.txt", "f2.txt", "f1.txt", "f0.txt"]


async def test_text_comes_back_in_order_and_by_page(database: Database) -> None:
    tenant = f"t-{uuid4().hex[:8]}"
    record = _record(tenant, "report.pdf")
    chunks = [FileTextRecord(page=p, text=f"page {p} part {i}") for p in (1, 2, 3) for i in (1, 2)]
    async with database.transaction() as connection:
        await FileRepository(connection, tenant).insert(record, chunks)
    async with database.read() as connection:
        repository = FileRepository(connection, tenant)
        assert await repository.texts(record.id) == chunks
        assert await repository.texts(record.id, first_page=2, last_page=3) == chunks[2:]
        assert await repository.texts(record.id, first_page=3, last_page=3) == chunks[4:]


async def test_deleting_a_file_deletes_its_text_from_search(database: Database) -> None:
    tenant = f"t-{uuid4().hex[:8]}"
    record = await _store_file(database, tenant, "the quarterly zeppelin inventory")
    assert await _search(database, tenant, "zeppelin") == ["notes.txt"]
    async with database.transaction() as connection:
        assert await FileRepository(connection, tenant).delete(record.id) == record
    async with database.read() as connection:
        assert await FileRepository(connection, tenant).texts(record.id) == []
    assert await _search(database, tenant, "zeppelin") == []


async def test_text_no_database_could_store_is_stored_replaced(database: Database) -> None:
    tenant = f"t-{uuid4().hex[:8]}"
    record = await _store_file(database, tenant, "a\x00b \ud800 c", name="odd\x00name.txt")
    async with database.read() as connection:
        repository = FileRepository(connection, tenant)
        assert [chunk.text for chunk in await repository.texts(record.id)] == ["a␀b \ufffd c"]
        stored = await repository.get(record.id)
    assert stored is not None
    assert stored.name == "odd␀name.txt"


# Search.


async def test_search_ranks_the_better_match_first_with_marked_snippets(
    database: Database,
) -> None:
    tenant = f"t-{uuid4().hex[:8]}"
    await _store_file(
        database,
        tenant,
        "Minutes of the meeting. The budget was discussed briefly among other things "
        "such as the weather and the parking lot.",
        name="minutes.txt",
    )
    await _store_file(
        database,
        tenant,
        "Budget plan: the budget for the budget year. Budget lines, budget owners and the "
        "budget review.",
        name="budget.txt",
    )
    await _store_file(database, tenant, "Nothing relevant here at all.", name="other.txt")
    async with database.read() as connection:
        hits = await FileRepository(connection, tenant).search("budget", limit=10)
    assert [hit.file.name for hit in hits] == ["budget.txt", "minutes.txt"]
    assert hits[0].rank > hits[1].rank > 0
    for hit in hits:
        assert "**budget**" in hit.snippet.lower()
        assert "\n" not in hit.snippet


async def test_search_stems_words_alike_on_both_databases(database: Database) -> None:
    tenant = f"t-{uuid4().hex[:8]}"
    await _store_file(database, tenant, "The engineers were running the benchmarks.")
    assert await _search(database, tenant, "run benchmark") == ["notes.txt"]


async def test_search_finds_each_file_once_at_its_best_page(database: Database) -> None:
    tenant = f"t-{uuid4().hex[:8]}"
    record = _record(tenant, "paper.pdf")
    chunks = [
        FileTextRecord(page=1, text="An introduction mentioning the falcon once."),
        FileTextRecord(page=2, text="Falcon falcon falcon: the falcon section, all falcon."),
        FileTextRecord(page=3, text="A conclusion that says falcon again."),
    ]
    async with database.transaction() as connection:
        await FileRepository(connection, tenant).insert(record, chunks)
    async with database.read() as connection:
        hits = await FileRepository(connection, tenant).search("falcon", limit=10)
    assert len(hits) == 1
    assert hits[0].page == 2


async def test_search_keeps_to_its_tenant_and_its_limit(database: Database) -> None:
    tenant, other = f"t-{uuid4().hex[:8]}", f"o-{uuid4().hex[:8]}"
    for index in range(3):
        await _store_file(database, tenant, f"walrus number {index}", name=f"w{index}.txt")
    await _store_file(database, other, "walrus walrus walrus", name="theirs.txt")
    assert len(await _search(database, tenant, "walrus", limit=2)) == 2
    assert "theirs.txt" not in await _search(database, tenant, "walrus")
    assert await _search(database, other, "walrus") == ["theirs.txt"]


async def test_search_takes_phrases_alternatives_and_exclusions(database: Database) -> None:
    tenant = f"t-{uuid4().hex[:8]}"
    await _store_file(database, tenant, "red apples and green pears", name="fruit.txt")
    await _store_file(database, tenant, "green apples, unripe", name="green.txt")
    assert await _search(database, tenant, '"red apples"') == ["fruit.txt"]
    assert sorted(await _search(database, tenant, "apples -pears")) == ["green.txt"]
    assert sorted(await _search(database, tenant, "pears or unripe")) == ["fruit.txt", "green.txt"]


QUERIES = [
    "",
    "   ",
    '"',
    '""',
    '"unclosed phrase',
    "AND",
    "OR",
    "NOT",
    "a AND OR NOT b",
    "NEAR(a b, 3)",
    "text:value",
    "col : x",
    "^start",
    "pre*",
    "*",
    "(((",
    ")",
    "-",
    "--",
    "-only",
    "'; DROP TABLE files; --",
    "!!! ??? ...",
    "the",
    "naïve café",
    "emoji 🙂 query",
    "nul\x00inside",
    "lone \ud800 surrogate",
    "x" * 5000,
    "a " * 600,
]


@pytest.mark.parametrize("query", QUERIES)
async def test_no_query_text_is_an_error(database: Database, query: str) -> None:
    tenant = f"t-{uuid4().hex[:8]}"
    await _store_file(database, tenant, "some searchable text about café and apples")
    assert isinstance(await _search(database, tenant, query), list)


async def test_search_uses_the_databases_text_index(database: Database) -> None:
    if database.is_sqlite:
        # SQLite answers MATCH from the FTS5 virtual table, never by scanning the texts.
        async with database.read() as connection:
            plan = (
                await connection.execute(
                    text(
                        "EXPLAIN QUERY PLAN SELECT rowid FROM file_texts_fts "
                        "WHERE file_texts_fts MATCH '\"budget\"'"
                    )
                )
            ).all()
        # `M`: the full-text index answers the MATCH (a scan would show no constraint).
        assert ":M" in " ".join(str(row[-1]) for row in plan)
        return
    async with database.read() as connection:
        await connection.execute(text("SET LOCAL enable_seqscan = off"))
        plan = (
            await connection.execute(
                text(
                    "EXPLAIN SELECT id FROM file_texts WHERE search_vector "
                    "@@ websearch_to_tsquery('english'::regconfig, 'budget')"
                )
            )
        ).all()
    assert FILE_SEARCH_INDEX in " ".join(row[0] for row in plan)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("budget", '("budget")'),
        ("two words", '("two" AND "words")'),
        ('"a phrase" word', '("a phrase" AND "word")'),
        ("a or b c", '("a") OR ("b" AND "c")'),
        ("a -b -c", '("a") NOT "b" NOT "c"'),
        ("a or b -c", '(("a") OR ("b")) NOT "c"'),
        ('say "hi', '("say" AND "hi")'),
        ('quo"te', '("quo""te")'),
        ("or a or", '("a")'),
        ("AND NOT", '("AND" AND "NOT")'),
        ("!!! ...", None),
        ("-only", None),
        ("", None),
    ],
)
def test_fts5_queries_quote_every_term(query: str, expected: str | None) -> None:
    assert fts5_query(query) == expected


@pytest.mark.parametrize(
    ("name", "type_", "kept"),
    [
        ("files", "table", True),
        ("file_texts", "table", True),
        ("file_texts_fts", "table", False),
        ("file_texts_fts_data", "table", False),
        ("search_vector", "column", False),
        ("text", "column", True),
        (FILE_SEARCH_INDEX, "index", False),
        ("ix_file_texts_file", "index", True),
        (None, "schema", True),
    ],
)
def test_the_search_objects_are_left_out_of_schema_comparisons(
    name: str | None, type_: str, kept: bool
) -> None:
    assert described(name, type_, {}) is kept
