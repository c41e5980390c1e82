"""S3-compatible storage through boto3 (AWS S3, MinIO, Ceph, R2, ...).

Credentials come from the standard AWS sources (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, a profile,
an instance role). Clients get presigned GET URLs, or `SCREENSHOT_CDN_BASE_URL` + key for the public
cache objects when a CDN fronts the bucket.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from storage.base import StoredObject
from storage.errors import StorageError

CACHE_PREFIX = "cache/"
_BUSY = frozenset({"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "RequestTimeTooSkewed"})


def transient_answer(error: ClientError) -> bool:
    """Whether the store's refusal may not be repeated on a later try: it is busy or failing (5xx, SlowDown)."""
    answered = error.response.get("Error", {}).get("Code", "")
    return answered in _BUSY or int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0) >= 500


class S3Storage:
    """Objects in one bucket."""

    def __init__(self, bucket: str, *, endpoint_url: str | None = None, region: str | None = None,
                 path_style: bool = False, cdn_base_url: str | None = None,
                 public_endpoint_url: str | None = None, timeout: float = 10.0) -> None:
        if not bucket:
            raise StorageError("the s3 backend needs a bucket: set SCREENSHOT_S3_BUCKET")
        self.bucket = bucket
        self.cdn_base_url = cdn_base_url.rstrip("/") if cdn_base_url else None
        config = Config(
            s3={"addressing_style": "path" if path_style else "auto"},
            signature_version="s3v4",
            # Each attempt within the budget of a call (storage.deadline bounds the whole call, retries included).
            connect_timeout=min(5.0, timeout),
            read_timeout=timeout,
            retries={"max_attempts": 3, "mode": "standard"},
        )
        self._client: Any = boto3.session.Session().client(
            "s3", endpoint_url=endpoint_url or None, region_name=region or None, config=config)
        self.where = f"bucket {bucket!r}" + (f" at {endpoint_url}" if endpoint_url else "")
        # Presigned URLs name the host they were signed for: when clients reach the store by another name
        # than the service does (compose: http://minio:9000 inside, http://localhost:9000 outside), they
        # are signed by a client configured with the public endpoint. Signing is local: no connection.
        self._signer: Any = self._client
        if public_endpoint_url:
            self._signer = boto3.session.Session().client(
                "s3", endpoint_url=public_endpoint_url, region_name=region or None, config=config)

    def _failure(self, action: str, key: str, error: Exception) -> StorageError:
        transient = not isinstance(error, ClientError) or transient_answer(error)
        if isinstance(error, ClientError):
            code = error.response.get("Error", {}).get("Code", "")
            hints = {
                "NoSuchBucket": "the bucket does not exist; create it or fix SCREENSHOT_S3_BUCKET",
                "AccessDenied": "access denied; check the credentials and the bucket policy",
                "InvalidAccessKeyId": "the access key id is not known to the store; check AWS_ACCESS_KEY_ID",
                "SignatureDoesNotMatch": "the secret key is wrong; check AWS_SECRET_ACCESS_KEY",
            }
            reason = hints.get(code, code or str(error))
        else:  # no credentials, endpoint unreachable, ...
            reason = str(error)
        return StorageError(f"cannot {action} {key!r} in {self.where}: {reason}", transient=transient)

    def put(self, key: str, data: bytes, content_type: str) -> StoredObject:
        try:
            self._client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type,
                                    ContentLength=len(data))
        except (ClientError, BotoCoreError) as error:
            raise self._failure("write", key, error) from None
        return StoredObject(key, len(data), content_type)

    def stat(self, key: str) -> StoredObject | None:
        try:
            head = self._client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise self._failure("read", key, error) from None
        except BotoCoreError as error:
            raise self._failure("read", key, error) from None
        return StoredObject(key, int(head["ContentLength"]), head.get("ContentType", "application/octet-stream"))

    def open(self, key: str, chunk_size: int = 1 << 16) -> Iterator[bytes]:
        try:
            body = self._client.get_object(Bucket=self.bucket, Key=key)["Body"]
        except (ClientError, BotoCoreError) as error:
            raise self._failure("read", key, error) from None
        try:
            yield from body.iter_chunks(chunk_size)
        finally:
            body.close()

    def delete(self, key: str) -> None:
        try:
            self._client.delete_object(Bucket=self.bucket, Key=key)
        except (ClientError, BotoCoreError) as error:
            raise self._failure("delete", key, error) from None

    def client_url(self, key: str, expires_in: int) -> str | None:
        if self.cdn_base_url and key.startswith(CACHE_PREFIX):
            return f"{self.cdn_base_url}/{key}"
        try:
            url: str = self._signer.generate_presigned_url(
                "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=expires_in)
        except (ClientError, BotoCoreError) as error:
            raise self._failure("sign a URL for", key, error) from None
        return url
