"""`store=true`: a result uploaded to the caller's own S3-compatible bucket with the caller's credentials.

The upload goes through the worker's egress proxy, so the network policy applies to the caller's endpoint
as to any page (an endpoint on a private network is refused unless the operator allows it). Only the
credentials the request gives are used, never the operator's (no environment, profile or instance role
is consulted), and they are neither stored nor logged: error messages name the store's error code only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from storage.errors import StorageError
from storage.s3 import transient_answer

AWS_REGION = "us-east-1"  # the region requests are signed for when the endpoint does not say
_REGION_IN_HOST = re.compile(r"\.s3[.-]([a-z0-9-]+)\.amazonaws\.com$")
@dataclass(frozen=True)
class Destination:
    """Where and how to upload, as the request says."""

    bucket: str
    key: str
    access_key_id: str
    secret_access_key: str
    endpoint: str | None = None  # None: Amazon S3
    storage_class: str | None = None
    acl: str | None = None
    reference: str | None = None  # the job's, written on the object: the same job uploads the same object

    @property
    def location(self) -> str:
        """The object's URL (path style on the caller's endpoint, virtual-hosted on Amazon S3)."""
        if self.endpoint:
            return f"{self.endpoint.rstrip('/')}/{self.bucket}/{quote(self.key)}"
        return f"https://{self.bucket}.s3.amazonaws.com/{quote(self.key)}"

    @property
    def host(self) -> str:
        if self.endpoint:
            return urlsplit(self.endpoint).hostname or ""
        return "s3.amazonaws.com"


def upload(destination: Destination, body: bytes, content_type: str, proxy_url: str, timeout: float = 10.0) -> str:
    """Put the object through the proxy at `proxy_url`, each attempt within `timeout` seconds; its location, or
    StorageError saying why not."""
    region = AWS_REGION
    if destination.endpoint and (found := _REGION_IN_HOST.search(urlsplit(destination.endpoint).hostname or "")):
        region = found.group(1)
    config = Config(s3={"addressing_style": "path" if destination.endpoint else "virtual"},
                    signature_version="s3v4", connect_timeout=min(5.0, timeout), read_timeout=timeout,
                    retries={"max_attempts": 2, "mode": "standard"},
                    proxies={"http": proxy_url, "https": proxy_url})
    session = boto3.session.Session(aws_access_key_id=destination.access_key_id,
                                    aws_secret_access_key=destination.secret_access_key, region_name=region)
    client: Any = session.client("s3", endpoint_url=destination.endpoint or None, config=config)
    extra: dict[str, Any] = {}
    if destination.reference:  # x-amz-meta-idempotency-key: a job rendered again rewrites this very object
        extra["Metadata"] = {"idempotency-key": destination.reference}
    if destination.storage_class:
        extra["StorageClass"] = destination.storage_class
    if destination.acl:
        extra["ACL"] = destination.acl
    try:
        client.put_object(Bucket=destination.bucket, Key=destination.key, Body=body, ContentType=content_type,
                          **extra)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "") or "an error"
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        hints = {
            "NoSuchBucket": "the bucket does not exist (storage_bucket)",
            "AccessDenied": "access denied; check the credentials' permissions and the bucket policy",
            "InvalidAccessKeyId": "the store does not know this access key (storage_access_key_id)",
            "SignatureDoesNotMatch": "the secret key does not match (storage_secret_access_key)",
            "InvalidStorageClass": "the store does not offer this storage_class",
        }
        raise StorageError(f"{hints.get(code, f'the store answered {code}')} (HTTP {status})",
                           transient=transient_answer(error)) from None
    except BotoCoreError as error:
        # Connection failures: name the endpoint, not the request (which carries the signature).
        raise StorageError(f"could not reach {destination.endpoint or 'Amazon S3'}: "
                           f"{type(error).__name__}", transient=True) from None
    finally:
        client.close()
    return destination.location
