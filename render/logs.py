"""Log lines as JSON objects (or plain text), each with the trace id of the request or job it serves.

The API sets the trace id per request, workers per job (`trace_id_var`). Nothing here logs parameters:
keys, signatures and vision keys never reach a log line.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime

trace_id_var: ContextVar[str | None] = ContextVar("trace_id", default=None)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, trace_id, and the exception if any."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        trace_id = trace_id_var.get()
        if trace_id:
            line["trace_id"] = trace_id
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        trace_id = trace_id_var.get()
        return super().format(record) + (f" [trace {trace_id}]" if trace_id else "")


# Third-party loggers kept at WARNING whatever the level: the S3 client's debug output holds each request's
# headers (the signature and access key id of the operator's store or of a caller's bucket, store=true);
# libvips reports every tile it writes at INFO ("jp2ksave: tile number 1 / 6").
QUIET_LOGGERS = ("botocore", "boto3", "s3transfer", "urllib3", "pyvips")


def configure(level: str, fmt: str) -> None:
    """Root logging for a service process: `fmt` is "json" or "text"."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    logging.basicConfig(level=level, handlers=[handler], force=True)
    quiet = max(logging.getLogger().level, logging.WARNING)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(quiet)
