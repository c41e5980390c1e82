"""Where outputs live: local directory or S3-compatible, behind one Protocol."""

from __future__ import annotations

from storage.base import Storage, StoredObject, object_key
from storage.deadline import Bounded, StoreTimedOut
from storage.errors import StorageError
from storage.local import LocalStorage
from storage.settings import StorageSettings


def open_storage(settings: StorageSettings) -> Bounded:
    """The configured backend, each call bounded by SCREENSHOT_STORAGE_TIMEOUT (boto3, about 10 MB, is imported
    only when S3 is)."""
    if settings.storage_backend == "s3":
        from storage.s3 import S3Storage

        s3 = S3Storage(settings.s3_bucket, endpoint_url=settings.s3_endpoint_url, region=settings.s3_region,
                       path_style=settings.s3_path_style, cdn_base_url=settings.cdn_base_url,
                       public_endpoint_url=settings.s3_public_endpoint_url, timeout=settings.storage_timeout)
        return Bounded(s3, settings.storage_timeout, s3.where)
    local = LocalStorage(settings.local_dir)
    return Bounded(local, settings.storage_timeout, local.where)


__all__ = ["Bounded", "LocalStorage", "Storage", "StorageError", "StorageSettings", "StoreTimedOut", "StoredObject",
           "object_key", "open_storage"]
