"""Which storage failures are worth trying again.

A write that failed because the database was unreachable, restarting, or asked the
transaction to be retried (serialization failure, deadlock, lock timeout) may succeed when
simply tried again. One that failed because of its data (a value refused, a constraint broken,
text an encoder cannot write) fails the same way every time: retrying it only delays everything
written with it.
"""

import errno
import socket
import traceback

from sqlalchemy import exc as sa_exc

from app.errors import OmniForgeError

# SQLSTATE classes and codes of failures that a retry can cure.
_TRANSIENT_CLASSES = ("08",)  # connection exceptions
_TRANSIENT_CODES = frozenset(
    {
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "55P03",  # lock_not_available
        "57P01",  # admin_shutdown
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now
        "53300",  # too_many_connections
    }
)


_NETWORK_ERRNOS = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.ENETUNREACH,
        errno.EHOSTUNREACH,
        errno.ETIMEDOUT,
        errno.ENETDOWN,
    }
)


class StoreUnavailable(OmniForgeError, ConnectionError):
    """The store cannot take writes now (an outage this process knows of): try again later."""


def is_transient(error: BaseException) -> bool:
    """Whether a storage operation that raised `error` may succeed if tried again."""
    if isinstance(error, sa_exc.DBAPIError):
        if error.connection_invalidated:
            return True
        code = getattr(error.orig, "sqlstate", None)
        if isinstance(code, str):
            return code.startswith(_TRANSIENT_CLASSES) or code in _TRANSIENT_CODES
        # SQLite ("database is locked") and drivers that name no code: by class.
        return isinstance(error, sa_exc.OperationalError | sa_exc.InterfaceError)
    # No connection to be had in time, or the socket failed under the driver (not any OSError:
    # a file that is not there is not cured by trying again).
    if isinstance(error, sa_exc.TimeoutError | ConnectionError | TimeoutError | socket.gaierror):
        return True
    return isinstance(error, OSError) and error.errno in _NETWORK_ERRNOS


# Where the database's failures are raised: its drivers, and SQLAlchemy over them.
_STORE_MODULES = ("asyncpg", "aiosqlite", "sqlite3", "sqlalchemy")


def is_store_outage(error: BaseException) -> bool:
    """Whether `error` says the database cannot serve now: a failure `is_transient` knows,
    raised by the database (SQLAlchemy's errors, `StoreUnavailable`, or a socket error or
    timeout raised under its driver). The same socket error or timeout raised anywhere else (a
    call to another service, a time limit of the code's own) says nothing of the database."""
    if not is_transient(error):
        return False
    if isinstance(error, sa_exc.SQLAlchemyError | StoreUnavailable):
        return True
    return any(
        str(frame.f_globals.get("__name__", "")).startswith(_STORE_MODULES)
        for frame, _ in traceback.walk_tb(error.__traceback__)
    )


def describe(error: BaseException) -> str:
    """The driver's error in one line, e.g. `ConnectionRefusedError: [Errno 111] Connect call
    failed ('127.0.0.1', 5432)` (SQLAlchemy's own text adds the statement and a link)."""
    if isinstance(error, BaseExceptionGroup):
        return describe(error.exceptions[0])
    original = getattr(error, "orig", None)
    if isinstance(original, BaseException):
        error = original
    first_line = next(iter(str(error).splitlines()), "")
    return f"{type(error).__name__}: {first_line}" if first_line else type(error).__name__
