"""The storage contract every backend fulfils."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol


@dataclass(frozen=True)
class StoredObject:
    """An object's metadata."""

    key: str
    size: int
    content_type: str


class Storage(Protocol):
    """Where outputs, cache objects and content live."""

    def put(self, key: str, data: bytes, content_type: str) -> StoredObject:
        """Store `data` under `key`, replacing any previous object."""
        ...

    def stat(self, key: str) -> StoredObject | None:
        """The object's metadata, or None when it does not exist."""
        ...

    def open(self, key: str, chunk_size: int = 1 << 16) -> Iterator[bytes]:
        """Stream the object's bytes."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object (no error when it is already gone)."""
        ...

    def client_url(self, key: str, expires_in: int) -> str | None:
        """A time-limited URL clients can fetch directly, or None when the API must serve it."""
        ...


def object_key(organisation: str, reference: str, extension: str, when: datetime | None = None) -> str:
    """Layout by organisation and date: `<org>/<yyyy>/<mm>/<dd>/<reference>.<ext>`."""
    when = when or datetime.now(UTC)
    return f"{organisation}/{when:%Y/%m/%d}/{reference}.{extension}"
