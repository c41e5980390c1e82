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

    @property
    def local_dir(self) -> Path:
        return (self.storage_dir or self.data_dir / "storage").absolute()
