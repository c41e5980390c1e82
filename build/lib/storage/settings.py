"""Storage settings (environment, prefix SCREENSHOT_)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class StorageSettings(BaseSettings):
    """Where results live."""

    model_config = SettingsConfigDict(env_prefix="SCREENSHOT_", extra="ignore")

    data_dir: Path = Field(Path("var"), description="Embedded Redis data and default local storage.")
    storage_backend: Literal["local", "s3"] = Field("local", description="local or s3.")
    storage_dir: Path | None = Field(None, description="Local backend directory (default DATA_DIR/storage).")
    result_url_ttl: int = Field(3600, ge=60, description="Seconds a returned screenshot_url stays valid.")
    s3_bucket: str = Field("", description="S3 backend: the bucket (it must exist).")
    s3_endpoint_url: str = Field("", description="S3 backend: endpoint of an S3-compatible store (MinIO, ...); "
                                 "empty for AWS.")
    s3_public_endpoint_url: str = Field(
        "", description="S3 backend: endpoint clients use to fetch results, when it differs from "
        "SCREENSHOT_S3_ENDPOINT_URL (presigned URLs are signed for it); empty: the same.")
    s3_region: str = Field("", description="S3 backend: region (empty: from the AWS configuration).")
    s3_path_style: bool = Field(False, description="S3 backend: path-style addressing (endpoint/bucket/key), "
                                "as most self-hosted stores need.")
    cdn_base_url: str = Field("", description="Base URL of a CDN in front of the bucket: cache URLs become "
                              "this + the object key.")

    @property
    def local_dir(self) -> Path:
        return (self.storage_dir or self.data_dir / "storage").absolute()
