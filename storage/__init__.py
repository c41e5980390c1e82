"""Where outputs live: local directory or S3-compatible, behind one Protocol."""

from __future__ import annotations

from storage.base import Storage, StoredObject, object_key
from storage.errors import StorageError
from storage.local import LocalStorage
from storage.settings import StorageSettings


def open_storage(settings: StorageSettings) -> Storage:
    """The configured backend."""
    if settings.storage_backend == "s3":
        raise StorageError("the s3 storage backend is not built yet; use SCREENSHOT_STORAGE_BACKEND=local")
    return LocalStorage(settings.local_dir)


__all__ = ["LocalStorage", "Storage", "StorageError", "StorageSettings", "StoredObject", "object_key",
           "open_storage"]
