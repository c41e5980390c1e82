"""Where outputs live: local directory or S3-compatible, behind one Protocol."""

from __future__ import annotations

from storage.base import Storage, StoredObject, object_key
from storage.errors import StorageError
from storage.local import LocalStorage
from storage.s3 import S3Storage
from storage.settings import StorageSettings


def open_storage(settings: StorageSettings) -> Storage:
    """The configured backend."""
    if settings.storage_backend == "s3":
        return S3Storage(settings.s3_bucket, endpoint_url=settings.s3_endpoint_url, region=settings.s3_region,
                         path_style=settings.s3_path_style, cdn_base_url=settings.cdn_base_url,
                         public_endpoint_url=settings.s3_public_endpoint_url)
    return LocalStorage(settings.local_dir)


__all__ = ["LocalStorage", "S3Storage", "Storage", "StorageError", "StorageSettings", "StoredObject", "object_key",
           "open_storage"]
