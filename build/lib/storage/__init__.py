"""Where outputs live: local directory or S3-compatible, behind one Protocol."""

from __future__ import annotations

from storage.base import Storage, StoredObject, object_key
from storage.errors import StorageError
from storage.local import LocalStorage
from storage.settings import StorageSettings


def open_storage(settings: StorageSettings) -> Storage:
    """The configured backend (boto3, about 10 MB, is imported only when S3 is)."""
    if settings.storage_backend == "s3":
        from storage.s3 import S3Storage

        return S3Storage(settings.s3_bucket, endpoint_url=settings.s3_endpoint_url, region=settings.s3_region,
                         path_style=settings.s3_path_style, cdn_base_url=settings.cdn_base_url,
                         public_endpoint_url=settings.s3_public_endpoint_url)
    return LocalStorage(settings.local_dir)


__all__ = ["LocalStorage", "Storage", "StorageError", "StorageSettings", "StoredObject", "object_key",
           "open_storage"]
