"""Log lines as JSON objects (python-json-logger) or plain text, each with the trace id of the request or
job it serves.

The API sets the trace id per request, workers per job (`trace_id_var`). Nothing here logs parameters:
keys, signatures and vision keys never reach a log line.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar

from pythonjsonlogger.json import JsonFormatter

trace_id_var: ContextVar[str | None] = ContextVar("trace_id", default=None)


class TraceFilter(logging.Filter):
    """Puts the trace id of the request or job being served on each record, as `trace_id`."""

    def filter(self, record: logging.LogRecord) -> bool:
        trace_id = trace_id_var.get()
        if trace_id and not hasattr(record, "trace_id"):
            record.trace_id = trace_id
        return True


def json_formatter() -> logging.Formatter:
    """One JSON object per line (python-json-logger): time, level, logger, message, trace_id, the
    exception if any, and every `extra=` field of the call (the access log's status, duration, ...)."""
    return JsonFormatter("%(levelname)s %(name)s %(message)s", timestamp="time", json_ensure_ascii=False,
                         rename_fields={"levelname": "level", "name": "logger", "exc_info": "exception"})


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        trace_id = getattr(record, "trace_id", None)
        return super().format(record) + (f" [trace {trace_id}]" if trace_id else "")


# Third-party loggers kept at WARNING whatever the level: the S3 client's debug output holds each request's
# headers (the signature and access key id of the operator's store or of a caller's bucket, store=true);
# libvips reports every tile it writes at INFO ("jp2ksave: tile number 1 / 6"); the HTTP client logs each
# request's full URL at INFO (a webhook URL may carry the receiver's token in its query).
QUIET_LOGGERS = ("botocore", "boto3", "s3transfer", "urllib3", "pyvips", "httpx", "httpcore")


def configure(level: str, fmt: str) -> None:
    """Root logging for a service process: `fmt` is "json" or "text"."""
    handler = logging.StreamHandler()
    handler.setFormatter(json_formatter() if fmt == "json" else TextFormatter())
    handler.addFilter(TraceFilter())
    logging.basicConfig(level=level, handlers=[handler], force=True)
    quiet = max(logging.getLogger().level, logging.WARNING)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(quiet)
