"""Structured JSON logs, one object per line, so a log pipeline can filter by partition, key,
identity or resource without parsing prose.

Fields passed as `extra={...}` become top-level keys; the message stays a human sentence.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone
from typing import Any, Final, TextIO

_STANDARD: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName",
}


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object: ts, level, logger, msg, then the `extra` fields."""

    structured = True
    """Tells `fivespot.commandline.boundary` that an error may go to this log with its trace."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, sort_keys=False)


def configure(level: str = "info", stream: TextIO | None = None) -> None:
    """Route every logger to one JSON handler on `stream` (stderr by default)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
