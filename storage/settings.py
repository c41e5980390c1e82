"""Storage settings (environment, prefix SCREENSHOT_)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class StorageSettings(BaseSettings):
    """Where results live."""

    model_config = SettingsConfigDict(env_prefix="SCREENSHOT_", extra="ignore")

    data_dir: Path = Field(Path("var"), json_schema_extra={"shown_default": "./var"}, description=(
        "Embedded Redis data and default local storage (two instances: two dirs)."))
    storage_backend: Literal["local", "s3"] = Field("local", description=(
        "`local` (a directory; the API serves signed, expiring URLs) or `s3` (any S3-compatible store; presigned "
        "URLs)."))
    storage_dir: Path | None = Field(None, json_schema_extra={"shown_default": "DATA_DIR/storage"}, description=(
        "Directory of the local backend."))
    storage_timeout: float = Field(10.0, gt=0, le=300, description=(
        "Seconds one call to the store may take (a write, a read, one chunk of a download; S3's retries included), "
        "and a `store=true` upload to the caller's bucket. Past it a capture answers `storage_access_denied` "
        "saying the store did not answer in time, and its worker goes on; an async job tries again until its own "
        "deadline. A sync job's calls also end by the job's deadline."))
    result_url_ttl: int = Field(3600, ge=60, description="Seconds a returned `screenshot_url` stays valid.")
    s3_bucket: str = Field("", description=(
        "S3 backend: the bucket; it must exist. Credentials: the standard AWS variables (`AWS_ACCESS_KEY_ID`, "
        "`AWS_SECRET_ACCESS_KEY`), profile or instance role."))
    s3_endpoint_url: str = Field("", description=(
        "S3 backend: endpoint of an S3-compatible store (MinIO, Ceph, R2, ...); empty for AWS."))
    s3_public_endpoint_url: str = Field(
        "", description=(
        "S3 backend: the endpoint clients fetch results from when it differs from the one the service uses (Compose: "
        "`http://minio:9000` inside, `http://localhost:9000` outside); presigned URLs are signed for it."))
    s3_region: str = Field("", description="S3 backend: region (empty: from the AWS configuration).")
    s3_path_style: bool = Field(False, description=(
        "S3 backend: path-style addressing (`endpoint/bucket/key`), which most self-hosted stores need."))
    cdn_base_url: str = Field("", description=(
        "Base URL of a CDN in front of the bucket: cache URLs become this + the object key (`cache/...`)."))

    @model_validator(mode="after")
    def _s3_needs_a_bucket(self) -> StorageSettings:
        if self.storage_backend == "s3" and not self.s3_bucket:
            raise ValueError("SCREENSHOT_STORAGE_BACKEND=s3 needs SCREENSHOT_S3_BUCKET, the bucket (it must exist); "
                             "or set SCREENSHOT_STORAGE_BACKEND=local")
        return self

    @property
    def local_dir(self) -> Path:
        return (self.storage_dir or self.data_dir / "storage").absolute()
