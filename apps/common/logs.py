"""The request id of the request being served (set by RequestIdMiddleware, kept by the audit trail)
and the JSON log format (LOG_FORMAT=json): one object per line, carrying that id.

Loaded by the logging configuration while the settings are read, so it imports nothing of Django."""

from __future__ import annotations

import contextvars
import json
import logging
from datetime import UTC, datetime

current_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", "request_id"?, "exc_info"?}`` on one line; the request
    id is the one the response returns in X-Request-ID, present while a request is served."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        # Django logs a request's 4xx/5xx once the middleware has returned, with the request attached.
        request_id = current_request_id.get() or getattr(getattr(record, "request", None), "request_id", "")
        if request_id:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)
