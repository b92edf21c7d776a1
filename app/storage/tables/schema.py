"""The one `MetaData` every table is defined on, with its naming convention, and the column
types the tables share."""

from sqlalchemy import MetaData, String

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

TENANT_ID = String(64)
SHORT = String(32)
NAME = String(255)
SLUG = String(64)
