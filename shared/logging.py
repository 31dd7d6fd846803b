"""Logs with a stable `action` field and the ids passed in `extra`: JSON, one object per line (for machines:
the default when stderr is not a terminal), or one readable line each (LOG_FORMAT=text, the default on a
terminal)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from shared.tracing import LogIds

# uvicorn's `color_message` is its message with terminal colour codes: never worth a field of its own.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "color_message"}


def _extra(record: logging.LogRecord) -> dict[str, Any]:
    """The fields passed in `extra`; one without a value (None) is left out: log calls name every field they may
    have (a field named at the call is one a test can check), and a null says nothing."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and v is not None}


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self._service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "service": self._service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_extra(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """`12:00:01.234 INFO  job created  action=job_created jobId=...` for a person at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created, UTC).strftime("%H:%M:%S.%f")[:-3]
        fields = " ".join(f"{k}={v}" for k, v in _extra(record).items())
        line = f"{moment} {record.levelname:<7} {record.getMessage()}" + (f"  {fields}" if fields else "")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(service: str, level: str = "INFO", log_format: str = "auto") -> None:
    """`log_format`: json, text, or auto (text when stderr is a terminal)."""
    handler = logging.StreamHandler(sys.stderr)
    text = log_format == "text" or (log_format == "auto" and sys.stderr.isatty())
    handler.setFormatter(TextFormatter() if text else JsonFormatter(service))
    handler.addFilter(LogIds())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("uvicorn.access",):
        logging.getLogger(noisy).setLevel(logging.WARNING)
