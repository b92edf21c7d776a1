"""files: metadata, extracted text with full-text search, bytes kept in the database

Revision ID: ec8c175d4bad
Revises: d4b8e2f6a913
Create Date: 2026-11-23 22:00:00.000000

Search uses each database's own engine: on Postgres a stored, generated `search_vector`
column (`to_tsvector('english', text)`) with a GIN index; on SQLite an FTS5 table over
`file_texts` (external content, kept in step by triggers, Porter stemming like Postgres'
`english`).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "ec8c175d4bad"
down_revision: str | None = "d4b8e2f6a913"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQLITE_SEARCH = (
    "CREATE VIRTUAL TABLE file_texts_fts USING fts5(text, content='file_texts', "
    "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER file_texts_fts_insert AFTER INSERT ON file_texts BEGIN "
    "INSERT INTO file_texts_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER file_texts_fts_delete AFTER DELETE ON file_texts BEGIN "
    "INSERT INTO file_texts_fts(file_texts_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "END",
    "CREATE TRIGGER file_texts_fts_update AFTER UPDATE ON file_texts BEGIN "
    "INSERT INTO file_texts_fts(file_texts_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "INSERT INTO file_texts_fts(rowid, text) VALUES (new.id, new.text); END",
)
_POSTGRES_SEARCH = (
    "ALTER TABLE file_texts ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, text)) STORED",
    "CREATE INDEX ix_file_texts_search ON file_texts USING gin (search_vector)",
)


def upgrade() -> None:
    moment = sa.DateTime(timezone=True)
    big_key = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "files",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("media_type", sa.String(length=127), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("pages", sa.Integer(), nullable=True),
        sa.Column("width", sa.Integer(), nullable=True),
        sa.Column("height", sa.Integer(), nullable=True),
        sa.Column("text_chars", sa.Integer(), nullable=True),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", moment, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_files")),
    )
    op.create_index(
        "ix_files_tenant_created", "files", ["tenant_id", "created_at", "id"], unique=False
    )
    op.create_table(
        "file_texts",
        sa.Column("id", big_key, autoincrement=True, nullable=False),
        sa.Column("file_id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("page", sa.Integer(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["file_id"],
            ["files.id"],
            name=op.f("fk_file_texts_file_id_files"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_file_texts")),
    )
    op.create_index("ix_file_texts_file", "file_texts", ["file_id", "id"], unique=False)
    op.create_table(
        "file_blobs",
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_file_blobs")),
    )
    dialect = op.get_bind().dialect.name
    for statement in _SQLITE_SEARCH if dialect == "sqlite" else _POSTGRES_SEARCH:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for trigger in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER file_texts_fts_{trigger}")
        op.execute("DROP TABLE file_texts_fts")
    else:
        op.execute("DROP INDEX ix_file_texts_search")
        op.execute("ALTER TABLE file_texts DROP COLUMN search_vector")
    op.drop_table("file_blobs")
    op.drop_index("ix_file_texts_file", table_name="file_texts")
    op.drop_table("file_texts")
    op.drop_index("ix_files_tenant_created", table_name="files")
    op.drop_table("files")
