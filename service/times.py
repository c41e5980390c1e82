"""How every answer writes a moment: ISO 8601 in UTC, to the second (`2026-11-27T14:28:06Z`)."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_time(unix_seconds: float) -> str:
    return datetime.fromtimestamp(unix_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
