"""API settings, and the composed settings of the whole service (environment, prefix SCREENSHOT_)."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from render.contract.wire import WebhookOrder
from render.queue.redis_client import RedisTarget, parse_sentinels
from render.settings import RenderSettings
from storage.settings import StorageSettings


def default_workers(cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """One render worker per core this process may use: with the headless shell a capture keeps about one core
    busy, and on two cores two workers served 36% more captures a second than one, each faster
    (bench/README.md). The cores are those it may run on, and no more than its cgroup's CPU limit (a
    container's `--cpus 1` on a bigger host is one worker, not one per host core)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limits = [("cpu.max", None), ("cpu/cpu.cfs_quota_us", "cpu/cpu.cfs_period_us"),  # cgroup v2, then v1
              ("cpu,cpuacct/cpu.cfs_quota_us", "cpu,cpuacct/cpu.cfs_period_us")]
    for quota_file, period_file in limits:
        try:
            if period_file is None:
                quota, period = (cgroup / quota_file).read_text().split()[:2]
            else:
                quota, period = (cgroup / quota_file).read_text().strip(), (cgroup / period_file).read_text().strip()
        except (OSError, ValueError):
            continue
        if quota not in ("max", "-1") and int(period) > 0:
            cores = min(cores, math.ceil(int(quota) / int(period)))
        break
    return max(1, cores)


class ServiceSettings(BaseSettings):
    """How the API listens, authenticates and bounds its work."""

    model_config = SettingsConfigDict(env_prefix="SCREENSHOT_", extra="ignore")

    host: str = Field("127.0.0.1", description="Address the API listens on.")
    port: int = Field(8000, ge=0, le=65535, description="Port the API listens on.")
    redis_url: str | None = Field(None, description="External Redis (`redis://`, `rediss://` for TLS, `unix://`; "
                                  "user and password in the URL, TLS options as query parameters, e.g. "
                                  "`?ssl_ca_certs=/ca.pem`); unset: `run` starts a private one.")
    redis_sentinels: str | None = Field(None, description="Redis Sentinel addresses, `host:port,host:port`: the "
                                        "primary is the one they name (SCREENSHOT_REDIS_MASTER_NAME), found again "
                                        "after a failover; SCREENSHOT_REDIS_URL then gives only the database, user, "
                                        "password and TLS options.")
    redis_master_name: str = Field("mymaster", min_length=1, description="The name the sentinels monitor the "
                                   "primary under.")
    redis_sentinel_password: str | None = Field(None, description="Password of the sentinels themselves "
                                                "(their `requirepass`), when they have one.")
    redis_retry_seconds: float = Field(12.0, ge=0, le=300, description="Seconds every role retries a lost Redis "
                                       "connection (backing off) before giving up (a request then gets "
                                       "temporary_unavailable): long enough to ride out a Sentinel failover.")
    worker_grace: float = Field(5.0, ge=0, le=300, description="Seconds a worker's heartbeat may stay missing "
                                "before the APIs fail its jobs as lost (a Redis failover or a network blink "
                                "must not); with the heartbeat's own 3 s, how soon a crashed worker is noticed.")
    job_record_ttl: int = Field(7 * 86400, ge=60, le=366 * 86400, description="Seconds GET /jobs/{reference} "
                                "knows a job after its last change (its record in Redis, and the mark that its "
                                "webhook was queued once).")
    workers: int = Field(default_factory=lambda: default_workers(), ge=1,
                         description="Render worker processes started by `run` (default: one per core it may "
                         "use, within its cgroup's CPU limit).")
    access_key: str | None = Field(None, description="Ensure an organisation with this access key exists.")
    signing_key: str | None = Field(None, description="Signing key of that organisation.")
    require_signature: bool = Field(False, description="That organisation refuses unsigned requests.")
    default_quota: int = Field(10000, ge=0, description="Monthly quota of new organisations.")
    default_concurrency: int = Field(10, ge=1, description="Concurrency limit of new organisations.")
    data_dir: Path = Field(Path("var"), description="Embedded Redis data and default local storage.")
    public_base_url: str | None = Field(None, description="How clients reach this service "
                                        "(default http://HOST:PORT).")
    max_body_bytes: int = Field(10 * 1024 * 1024, ge=1024, description="Largest request body accepted.")
    max_queue: int = Field(200, ge=1, description="Jobs waiting for a worker (not yet handed to one) in a lane "
                           "before new requests get temporary_unavailable.")
    result_wait_grace: float = Field(10.0, ge=0, description="Seconds past a request's timeout the API "
                                     "waits for a worker before answering timeout_error.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Log level of the "
                                                                     "API and workers.")
    log_format: Literal["json", "text"] = Field("json", description="Log lines as JSON objects (with the trace "
                                                "id) or plain text.")
    access_log: bool = Field(True, description="One INFO line per API request: method, path, route, status, "
                             "error code, duration, organisation, trace id (health probes and /metrics at DEBUG).")
    url_signing_secret: str | None = Field(None, description="Secret signing local storage URLs "
                                           "(default: generated once and kept in Redis).")

    monitor_min_interval: int = Field(60, ge=1, description="Shortest time between two runs of a monitor, in "
                                      "seconds (an interval, or a cron expression's closest two times).")
    monitors_max: int = Field(100, ge=0, description="Monitors an organisation may have.")

    webhook_timeout: float = Field(10.0, gt=0, description="Seconds a webhook receiver has to answer an attempt.")
    webhook_retry_schedule: str = Field(
        "60,300,1800,7200,43200", pattern=r"^\s*\d+(\s*,\s*\d+)*\s*$",
        description="Seconds before each retry of an undelivered webhook (comma-separated).")
    bulk_max_requests: int = Field(20, ge=1, le=1000, description="Most requests in one /bulk call.")
    hosted_header_names: bool = Field(False, description="Send each x-service-* response and webhook header "
                                      "also under the hosted API's name, x-screenshotone-* (for code written "
                                      "against its SDKs; README, Moving from the hosted API).")

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value is not None and urlsplit(value).scheme not in ("redis", "rediss", "unix"):
            raise ValueError("expected redis://host:port/db, rediss://... (TLS) or unix:///path.sock")
        return value

    @field_validator("redis_sentinels")
    @classmethod
    def _redis_sentinels(cls, value: str | None) -> str | None:
        if value is not None:
            parse_sentinels(value)
        return value

    @model_validator(mode="after")
    def _sentinels_need_a_url(self) -> ServiceSettings:
        if self.redis_sentinels and not self.redis_url:
            raise ValueError("SCREENSHOT_REDIS_SENTINELS needs SCREENSHOT_REDIS_URL too, for the database, user, "
                             "password and TLS options (e.g. redis://user:password@mymaster/0; its host is not used)")
        return self

    def redis(self) -> RedisTarget:
        """How to reach the configured Redis (SCREENSHOT_REDIS_URL, and Sentinel when set)."""
        assert self.redis_url, "no Redis configured (`run` starts the private one and sets SCREENSHOT_REDIS_URL)"
        sentinels = parse_sentinels(self.redis_sentinels) if self.redis_sentinels else ()
        return RedisTarget(self.redis_url, sentinels, self.redis_master_name, self.redis_sentinel_password,
                           self.redis_retry_seconds)

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    def webhook_order(self, url: str, *, sign: bool, errors: bool) -> WebhookOrder:
        """Where a job's outcome goes, with this process's retry schedule and attempt timeout."""
        schedule = [int(part) for part in self.webhook_retry_schedule.replace(" ", "").split(",") if part]
        return WebhookOrder(url=url, sign=sign, errors=errors, schedule=schedule, timeout=self.webhook_timeout)

    @property
    def base_url(self) -> str:
        """Where clients reach the API: SCREENSHOT_PUBLIC_BASE_URL, else the listening address (loopback for a
        server listening on every interface: 0.0.0.0 is no address to send a request to)."""
        host = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(self.host, self.host)
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return (self.public_base_url or f"http://{host}:{self.port}").rstrip("/")


@dataclass(frozen=True)
class Settings:
    """Everything one process needs, each part owned by its package."""

    service: ServiceSettings
    render: RenderSettings
    storage: StorageSettings


class SettingsError(Exception):
    """An environment variable holds an invalid value; the message names it."""


# Settings whose values are never repeated in an error (keys and secrets).
_UNSHOWN = re.compile(r"key|secret|password|token", re.IGNORECASE)


def setting_problems(error: ValidationError) -> list[str]:
    """One line per invalid setting: its variable, its value (unless secret) and what is expected."""
    lines = []
    for item in error.errors(include_url=False):
        message = str(item["msg"]).removeprefix("Value error, ")
        if not item["loc"]:  # a rule across settings: the message names them
            lines.append(message)
            continue
        name = f"SCREENSHOT_{str(item['loc'][0]).upper()}"
        shown = "" if _UNSHOWN.search(name) else f"={item.get('input')!s}"
        lines.append(f"{name}{shown}: {message}")
    return lines


def load_settings() -> Settings:
    """Read every package's settings from the environment, naming any bad variable."""
    problems: list[str] = []
    parts: list[object] = []
    for model in (ServiceSettings, RenderSettings, StorageSettings):
        try:
            parts.append(model())
        except ValidationError as error:
            problems += setting_problems(error)
    if problems:
        raise SettingsError("\n".join(problems))
    return Settings(*parts)  # type: ignore[arg-type]
