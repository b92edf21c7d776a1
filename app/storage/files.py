"""Uploaded files: their metadata and extracted text within one tenant, full-text search over
that text with the database's own engine (Postgres text search, SQLite FTS5), and their bytes
behind `FileStore` (in the database, or in a directory)."""

import asyncio
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol
from uuid import UUID

from sqlalchemy import (
    ColumnElement,
    Select,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    text,
    true,
)
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnClause

from app.storage.database import Database
from app.storage.pagination import Cursor, Page
from app.storage.records import FileHit, FileRecord, FileTextRecord
from app.storage.repository import TenantScoped
from app.storage.tables import FILE_SEARCH_COLUMN, FILE_SEARCH_TABLE, file_blobs, file_texts, files
from app.storage.text import storable

_KEY = re.compile(r"[A-Za-z0-9_-]{1,128}")

# Matched words are marked alike on both backends.
MARK = "**"
ELLIPSIS = "…"
MAX_QUERY_CHARS = 1000


class FileStore(Protocol):
    """Files' bytes by key (`[A-Za-z0-9_-]{1,128}`, a file's id). `put` replaces what a key
    held; `get` of a key that holds nothing is None; `delete` of one is no error."""

    async def put(self, key: str, data: bytes) -> None: ...

    async def get(self, key: str) -> bytes | None: ...

    async def delete(self, key: str) -> None: ...


def _checked(key: str) -> str:
    if _KEY.fullmatch(key) is None:
        raise ValueError(f"not a file store key: {key!r}")
    return key


class DatabaseFileStore:
    """Bytes in the `file_blobs` table: nothing to set up, backed up with the database."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def put(self, key: str, data: bytes) -> None:
        async with self._database.transaction() as connection:
            await connection.execute(delete(file_blobs).where(file_blobs.c.key == _checked(key)))
            await connection.execute(insert(file_blobs).values(key=key, data=data))

    async def get(self, key: str) -> bytes | None:
        async with self._database.read() as connection:
            data = await connection.scalar(
                select(file_blobs.c.data).where(file_blobs.c.key == _checked(key))
            )
        return None if data is None else bytes(data)

    async def delete(self, key: str) -> None:
        async with self._database.transaction() as connection:
            await connection.execute(delete(file_blobs).where(file_blobs.c.key == _checked(key)))


class DirectoryFileStore:
    """Bytes as files under `root` (`root/ab/abcdef…`), written to a temporary file and moved
    into place, so that a reader never sees half a file. The directory is made on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        key = _checked(key)
        return self.root / key[:2] / key

    async def put(self, key: str, data: bytes) -> None:
        await asyncio.to_thread(self._write, self._path(key), data)

    async def get(self, key: str) -> bytes | None:
        return await asyncio.to_thread(self._read, self._path(key))

    async def delete(self, key: str) -> None:
        await asyncio.to_thread(self._path(key).unlink, missing_ok=True)

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".upload-")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    @staticmethod
    def _read(path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None


def visible_to(reader: str | None) -> ColumnElement[bool]:
    """The files `reader` may see: the tenant's shared ones and its own; None: every file."""
    if reader is None:
        return true()
    return or_(files.c.visibility == "tenant", files.c.created_by == reader)


class FileRepository(TenantScoped):
    """One tenant's files' metadata and text, as `reader` sees them: the tenant's shared
    files and its own private ones; None (the service itself, those who manage the tenant's
    files) sees every file. A file it may not see is not found, as another tenant's."""

    def __init__(
        self, connection: AsyncConnection, tenant_id: str, *, reader: str | None = None
    ) -> None:
        super().__init__(connection, tenant_id)
        self.reader = reader

    def _select(self) -> Select[Any]:
        return select(files).where(files.c.tenant_id == self.tenant_id, visible_to(self.reader))

    def _visible_ids(self) -> Select[Any]:
        return select(files.c.id).where(
            files.c.tenant_id == self.tenant_id, visible_to(self.reader)
        )

    async def insert(self, record: FileRecord, chunks: Sequence[FileTextRecord]) -> None:
        """Stores `record` (of this tenant) with its text `chunks`, in order."""
        if record.tenant_id != self.tenant_id:
            raise ValueError("a file is stored by its own tenant's repository")
        values = record.model_dump()
        values["name"] = storable(record.name)
        await self.connection.execute(insert(files).values(**values))
        if chunks:
            await self.connection.execute(
                insert(file_texts),
                [
                    {
                        "file_id": record.id,
                        "tenant_id": self.tenant_id,
                        "page": chunk.page,
                        "text": storable(chunk.text),
                    }
                    for chunk in chunks
                ],
            )

    async def get(self, file_id: UUID) -> FileRecord | None:
        row = (await self.connection.execute(self._select().where(files.c.id == file_id))).first()
        return None if row is None else FileRecord.model_validate(row._mapping)

    async def get_many(self, file_ids: Sequence[UUID]) -> list[FileRecord]:
        """Those of `file_ids` that are this tenant's, in no particular order."""
        if not file_ids:
            return []
        statement = self._select().where(files.c.id.in_(file_ids))
        rows = (await self.connection.execute(statement)).all()
        return [FileRecord.model_validate(row._mapping) for row in rows]

    async def page(self, *, cursor: Cursor | None, limit: int) -> Page[FileRecord]:
        """Newest first."""
        c = files.c
        statement = self._select()
        if cursor is not None:
            statement = statement.where(cursor.before(c.created_at, c.id))
        statement = statement.order_by(c.created_at.desc(), c.id.desc()).limit(limit + 1)
        rows = (await self.connection.execute(statement)).all()
        fetched = [FileRecord.model_validate(row._mapping) for row in rows]
        return Page.of(fetched, limit, lambda item: Cursor(item.created_at, item.id))

    async def set_visibility(self, file_id: UUID, visibility: str) -> FileRecord | None:
        """The file with its new `visibility`, or None if this reader sees no such file."""
        record = await self.get(file_id)
        if record is not None:
            await self.connection.execute(
                files.update()
                .where(files.c.tenant_id == self.tenant_id, files.c.id == file_id)
                .values(visibility=visibility)
            )
            record = record.model_copy(update={"visibility": visibility})
        return record

    async def delete(self, file_id: UUID) -> FileRecord | None:
        """Deletes the file's metadata and text; the deleted record, or None."""
        record = await self.get(file_id)
        if record is not None:
            # The text first: SQLite's FTS triggers see each chunk go.
            await self.connection.execute(delete(file_texts).where(file_texts.c.file_id == file_id))
            await self.connection.execute(
                delete(files).where(files.c.tenant_id == self.tenant_id, files.c.id == file_id)
            )
        return record

    async def texts(
        self, file_id: UUID, *, first_page: int | None = None, last_page: int | None = None
    ) -> list[FileTextRecord]:
        """The file's text chunks in order, within the pages given (PDFs)."""
        t = file_texts.c
        statement = select(t.page, t.text).where(
            t.tenant_id == self.tenant_id, t.file_id == file_id
        )
        if first_page is not None:
            statement = statement.where(t.page >= first_page)
        if last_page is not None:
            statement = statement.where(t.page <= last_page)
        rows = (await self.connection.execute(statement.order_by(t.id))).all()
        return [FileTextRecord(page=row.page, text=row.text) for row in rows]

    async def search(self, query: str, *, limit: int) -> list[FileHit]:
        """The files whose text matches `query` (words, "quoted phrases", `or`, `-word`, as
        in a web search), best first, each with its best-matching chunk's snippet. Any text
        is a valid query: what cannot match finds nothing."""
        query = storable(query[:MAX_QUERY_CHARS])
        search: _SqliteSearch | _PostgresSearch
        if self.connection.dialect.name == "sqlite":
            search = _SqliteSearch(self.connection, self.tenant_id, self.reader)
        else:
            search = _PostgresSearch(self.connection, self.tenant_id, self._visible_ids())
        best = await search.best(query, limit)
        if not best:
            return []
        snippets = await search.snippets(query, [chunk_id for chunk_id, *_ in best])
        records = {record.id: record for record in await self.get_many([b[1] for b in best])}
        return [
            FileHit(
                file=records[file_id],
                page=page,
                rank=rank,
                snippet=" ".join(snippets.get(chunk_id, "").split()),
            )
            for chunk_id, file_id, page, rank in best
            if file_id in records
        ]


# (chunk id, file id, page, rank): a file's best-matching chunk.
_Best = tuple[int, UUID, int | None, float]


# The text search configuration of the stored vectors (`file_texts.search_vector`, generated
# by Postgres, GIN-indexed): queries are parsed with the same one.
_CONFIG: ColumnClause[Any] = literal_column("'english'::regconfig")
_VECTOR: ColumnClause[Any] = literal_column(f"file_texts.{FILE_SEARCH_COLUMN}")
_HEADLINE_OPTIONS = (
    f'StartSel="{MARK}", StopSel="{MARK}", MaxWords=30, MinWords=12, '
    f'MaxFragments=2, FragmentDelimiter=" {ELLIPSIS} "'
)


class _PostgresSearch:
    def __init__(self, connection: AsyncConnection, tenant_id: str, visible: Select[Any]) -> None:
        self.connection = connection
        self.tenant_id = tenant_id
        self.visible = visible

    async def best(self, query: str, limit: int) -> list[_Best]:
        t = file_texts.c
        vector = _VECTOR
        tsquery = func.websearch_to_tsquery(_CONFIG, query)
        rank = func.ts_rank(vector, tsquery)
        ranked = (
            select(
                t.id,
                t.file_id,
                t.page,
                rank.label("rank"),
                func.row_number()
                .over(partition_by=t.file_id, order_by=(rank.desc(), t.id))
                .label("n"),
            )
            .where(
                t.tenant_id == self.tenant_id,
                t.file_id.in_(self.visible),
                vector.bool_op("@@")(tsquery),
            )
            .subquery()
        )
        r = ranked.c
        statement = (
            select(r.id, r.file_id, r.page, r.rank)
            .where(r.n == 1)
            .order_by(r.rank.desc(), r.id)
            .limit(limit)
        )
        rows = (await self.connection.execute(statement)).all()
        return [(row.id, row.file_id, row.page, float(row.rank)) for row in rows]

    async def snippets(self, query: str, chunk_ids: list[int]) -> dict[int, str]:
        t = file_texts.c
        headline = func.ts_headline(
            _CONFIG, t.text, func.websearch_to_tsquery(_CONFIG, query), _HEADLINE_OPTIONS
        )
        statement = select(t.id, headline).where(t.tenant_id == self.tenant_id, t.id.in_(chunk_ids))
        return {row[0]: row[1] for row in (await self.connection.execute(statement)).all()}


# FTS5's auxiliary functions (bm25, snippet) only work in the query that runs MATCH, so the
# ranking happens there and the per-file choice around it. bm25 is lower for better matches.
_SQLITE_BEST = text(
    f"""
    SELECT id, file_id, page, rank FROM (
        SELECT id, file_id, page, rank,
               row_number() OVER (PARTITION BY file_id ORDER BY rank DESC, id) AS n
        FROM (
            SELECT t.id AS id, t.file_id AS file_id, t.page AS page,
                   -bm25({FILE_SEARCH_TABLE}) AS rank
            FROM {FILE_SEARCH_TABLE} JOIN file_texts AS t ON t.id = {FILE_SEARCH_TABLE}.rowid
            WHERE {FILE_SEARCH_TABLE} MATCH :query AND t.tenant_id = :tenant_id
              AND t.file_id IN (
                  SELECT f.id FROM files AS f WHERE f.tenant_id = :tenant_id
                  AND (:everyone OR f.visibility = 'tenant' OR f.created_by = :reader)
              )
        )
    )
    WHERE n = 1 ORDER BY rank DESC, id LIMIT :limit
    """
)
_SQLITE_SNIPPETS = text(
    f"""
    SELECT {FILE_SEARCH_TABLE}.rowid,
           snippet({FILE_SEARCH_TABLE}, 0, :mark, :mark, :ellipsis, 24)
    FROM {FILE_SEARCH_TABLE} JOIN file_texts AS t ON t.id = {FILE_SEARCH_TABLE}.rowid
    WHERE {FILE_SEARCH_TABLE} MATCH :query AND t.tenant_id = :tenant_id
      AND {FILE_SEARCH_TABLE}.rowid IN :chunk_ids
    """
).bindparams(bindparam("chunk_ids", expanding=True))


class _SqliteSearch:
    def __init__(self, connection: AsyncConnection, tenant_id: str, reader: str | None) -> None:
        self.connection = connection
        self.tenant_id = tenant_id
        self.reader = reader

    async def best(self, query: str, limit: int) -> list[_Best]:
        match = fts5_query(query)
        if match is None:
            return []
        parameters = {
            "query": match,
            "tenant_id": self.tenant_id,
            "limit": limit,
            "everyone": self.reader is None,
            "reader": self.reader or "",
        }
        rows = (await self.connection.execute(_SQLITE_BEST, parameters)).all()
        return [(row.id, _uuid(row.file_id), row.page, float(row.rank)) for row in rows]

    async def snippets(self, query: str, chunk_ids: list[int]) -> dict[int, str]:
        parameters = {
            "query": fts5_query(query),
            "tenant_id": self.tenant_id,
            "chunk_ids": chunk_ids,
            "mark": MARK,
            "ellipsis": ELLIPSIS,
        }
        rows = (await self.connection.execute(_SQLITE_SNIPPETS, parameters)).all()
        return {row[0]: row[1] for row in rows}


def _uuid(value: Any) -> UUID:
    # A textual query hands SQLite's stored UUIDs back as their 32 hex digits.
    return value if isinstance(value, UUID) else UUID(str(value))


_TERM = re.compile(r'"([^"]*)"?|(\S+)')


def fts5_query(query: str) -> str | None:
    """A web-search-like query (words, "quoted phrases", `or` between alternatives, `-word`
    to exclude) as an FTS5 expression in which every term is a quoted string, so that no input
    is an FTS5 syntax error. None when nothing in it can match (no word characters)."""
    alternatives: list[list[str]] = [[]]
    excluded: list[str] = []
    for match in _TERM.finditer(query):
        phrase, word = match.group(1), match.group(2)
        if word is not None and word.lower() == "or":
            if alternatives[-1]:
                alternatives.append([])
            continue
        negated = phrase is None and word.startswith("-")
        term = word.lstrip("-") if phrase is None else phrase
        if not any(char.isalnum() for char in term):
            continue
        quoted = '"' + term.replace('"', '""') + '"'
        (excluded if negated else alternatives[-1]).append(quoted)
    groups = [" AND ".join(group) for group in alternatives if group]
    if not groups:
        return None
    expression = " OR ".join(f"({group})" for group in groups)
    if excluded and len(groups) > 1:
        expression = f"({expression})"  # NOT binds tighter than OR
    return "".join([expression, *(f" NOT {term}" for term in excluded)])
