"""Logs as one JSON object per line (`OMNIFORGE_LOG_FORMAT=json`): what log collectors parse
without a pattern. Each line carries the ids of the request, tenant, task and chain it is
about where they are known (`log_context`).

Masking happens before formatting: the handler's masking filters (secret values, credentials,
stream tickets) rewrite a record's message, arguments and exception text, and this formatter
only serializes what they left."""

import json
import logging
from datetime import UTC, datetime
from typing import Any, Literal

from app.observability.log_context import log_ids

LogFormat = Literal["text", "json"]


class JsonFormatter(logging.Formatter):
    """`{"timestamp", "level", "logger", "message", ...ids, "exception"?, "stack"?}`; uvicorn's
    access lines also carry `http` (client, method, path, version, status)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **log_ids(),
        }
        access = _access(record)
        if access is not None:
            line["http"] = access
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def _access(record: logging.LogRecord) -> dict[str, Any] | None:
    """The fields of a uvicorn access line (its arguments: client, method, path with query,
    HTTP version, status), already masked."""
    args = record.args
    if record.name != "uvicorn.access" or not isinstance(args, tuple) or len(args) != 5:
        return None
    client, method, path, version, status = args
    return {
        "client": str(client),
        "method": str(method),
        "path": str(path),
        "version": str(version),
        "status": status,
    }


def json_log_config(level: str = "INFO") -> dict[str, Any]:
    """A `logging.config.dictConfig` (and uvicorn `log_config`) that writes every line, the
    application's and uvicorn's, as JSON to stderr."""
    handler = ["json"]
    return {
        "version": 1,
        # Loggers made at import time (every module's) keep working.
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {
            "json": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            }
        },
        "loggers": {
            "uvicorn": {"handlers": handler, "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": handler, "level": level, "propagate": False},
        },
        "root": {"handlers": handler, "level": level},
    }


def uvicorn_log_config(log_format: LogFormat) -> dict[str, Any]:
    """What `uvicorn` configures its logging with in this format: its own default for text."""
    if log_format == "json":
        return json_log_config()
    from uvicorn.config import LOGGING_CONFIG

    return LOGGING_CONFIG
