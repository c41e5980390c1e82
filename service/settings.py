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
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from render.contract.wire import WebhookOrder
from render.queue.redis_client import RedisTarget, parse_sentinels
from render.settings import PROXY_SETTING, RenderSettings
from storage.settings import StorageSettings


def default_workers(cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """One render worker per core this process may use: with the headless shell a capture keeps about one core
    busy, and two workers on two cores serve more captures a second than one (bench/README.md). The cores are
    those it may run on, and no more than its cgroup's CPU limit (a container's `--cpus 1` on a bigger host is one
    worker, not one per host core)."""
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
    redis_url: str | None = Field(None, description=(
        "External Redis (`redis://`, `rediss://` for TLS, `unix://`); user and password in the URL "
        "(`rediss://user:password@host:6380/0`), TLS options as query parameters (`?ssl_ca_certs=/etc/ca.pem`); "
        "unset: `run` starts a private one."))
    redis_sentinels: str | None = Field(None, description=(
        "Redis Sentinel addresses, `host:port,host:port`: the service uses the primary they name and follows a "
        "failover by itself; `SCREENSHOT_REDIS_URL` then gives only the database, user, password and TLS options "
        "(its host is not used)."))
    redis_master_name: str = Field("mymaster", min_length=1, description=(
        "The name the sentinels monitor the primary under."))
    redis_sentinel_password: str | None = Field(None, description=(
        "Password of the sentinels themselves (their `requirepass`), when they have one."))
    redis_retry_seconds: float = Field(12.0, ge=0, le=300, description=(
        "Seconds every role retries a lost Redis connection (backing off to 0.5 s) before giving up; a request then "
        "gets `temporary_unavailable`. Long enough to ride out a Sentinel failover "
        "([operating](operating.md#redis-in-production))."))
    worker_grace: float = Field(5.0, ge=0, le=300, description=(
        "Seconds a worker's heartbeat may stay missing before the APIs take its jobs back (a failover or a network "
        "blink must not): a job it had not started is offered again, an async one it had started runs once more, a "
        "sync one it had started is answered `internal_application_error` (retryable). With the heartbeat's own 3 s, "
        "how soon a crashed worker's jobs move."))
    job_record_ttl: int = Field(7 * 86400, ge=60, le=366 * 86400, description=(
        "Seconds GET /jobs/{reference} knows a job after its last change (its record in Redis, and the mark that its "
        "webhook was queued once)."))
    workers: int = Field(default_factory=lambda: default_workers(), ge=1,
                         json_schema_extra={"shown_default": "one per core"}, description=(
        "Render worker processes started by `run` (one per core it may use, within its cgroup's CPU limit: `--cpus "
        "1` gives one; at least one)."))
    access_key: str | None = Field(None, description=(
        "`run` and `api` make sure an organisation with this access key exists."))
    signing_key: str | None = Field(None, description="Signing key of that organisation.")
    require_signature: bool = Field(False, description="That organisation refuses unsigned requests.")
    default_quota: int = Field(10000, ge=0, description="Monthly quota of organisations created without one.")
    default_concurrency: int = Field(10, ge=1, description="Concurrency limit of organisations created without one.")
    data_dir: Path = Field(Path("var"), json_schema_extra={"shown_default": "./var"}, description=(
        "Embedded Redis data and default local storage (two instances: two dirs)."))
    public_base_url: str | None = Field(None, json_schema_extra={"shown_default": "http://HOST:PORT"}, description=(
        "How clients reach this service (in the URLs it returns)."))
    max_body_bytes: int = Field(10 * 1024 * 1024, ge=1024, description=(
        "Larger request bodies get 413 `request_body_too_large`."))
    max_queue: int = Field(200, ge=1, description=(
        "Jobs waiting for a worker (not yet handed to one) in a lane, sync and async alike, shared fairly between "
        "organisations: while a lane holds this many, a job of an organisation that already has its share waiting "
        "(this number over the organisations with jobs waiting, itself counted) gets 503 `temporary_unavailable` "
        "with `Retry-After: 5`; one under its share is still accepted, so a lane holds at most twice this ([sharing "
        "one deployment](operating.md#sharing-one-deployment))."))
    result_wait_grace: float = Field(10.0, ge=0, description=(
        "Seconds past a request's timeout the API waits for a worker before `timeout_error`."))
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description=(
        "Log level of the API and workers."))
    log_format: Literal["json", "text"] = Field("json", description=(
        "`json`: one JSON object per line (`time`, `level`, `logger`, `message`, `trace_id`, `exception`, and the "
        "access log's fields); `text`: plain lines. Parameters are never logged, so no key, signature or vision key "
        "is."))
    access_log: bool = Field(True, description=(
        "One INFO line per API request ([logs](operating.md#logs)); `false` turns it off."))
    url_signing_secret: str | None = Field(None, json_schema_extra={"shown_default": "generated, kept in Redis"},
                                           description=(
        "Secret of local storage download links (default: generated once, kept in Redis)."))

    monitor_min_interval: int = Field(60, ge=1, description=(
        "Shortest time between two runs of a monitor, in seconds (an interval, or a cron expression's closest two "
        "times)."))
    monitors_max: int = Field(100, ge=0, description="Monitors an organisation may have.")

    webhook_timeout: float = Field(10.0, gt=0, description=(
        "Seconds a webhook receiver has to answer an attempt before it counts as failed."))
    webhook_retry_schedule: str = Field(
        "60,300,1800,7200,43200", pattern=r"^\s*\d+(\s*,\s*\d+)*\s*$",
        description=(
        "Seconds before each retry of an undelivered webhook: 1 min, 5 min, 30 min, 2 h, 12 h (six attempts in all)."))
    bulk_max_requests: int = Field(20, ge=1, le=1000, description="Most requests in one `/bulk` call.")
    hosted_header_names: bool = Field(False, description=(
        "Send each `x-service-*` response and webhook header also under the hosted API's name, `x-screenshotone-*` "
        "([moving from the hosted API](migrating.md))."))

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


SHOWN_DEFAULT = "shown_default"  # a field's json_schema_extra key: its default as the reference states it


def _shown_default(field: FieldInfo) -> str:
    extra = field.json_schema_extra
    if isinstance(extra, dict) and SHOWN_DEFAULT in extra:
        return str(extra[SHOWN_DEFAULT])
    value = field.get_default(call_default_factory=False)
    if value is None:
        return "unset"
    if value == "":
        return "empty"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def reference() -> str:
    """docs/settings.md: every setting of every package, from the settings classes (`make docs`)."""
    lines = [
        "# Settings",
        "",
        "<!-- Generated by `make docs` from the settings classes (service/settings.py, render/settings.py,",
        "storage/settings.py); tests/unit/test_docs.py holds it current. Edit the classes, not this file. -->",
        "",
        "Environment variables, prefix `SCREENSHOT_`. Every one is checked before anything starts: an invalid value",
        "is one line on stderr naming the variable, its value (not for keys, secrets and proxy passwords) and what",
        "is expected, and the command exits with status 2, e.g.",
        "",
        "```text",
        "error: SCREENSHOT_ALLOWED_NETWORKS=300.1.1.1/99: entry '300.1.1.1/99' is neither a network "
        "(10.1.0.0/16, 192.0.2.7, 2001:db8::/32) nor a host name",
        "```",
    ]
    seen: set[str] = set()
    for model, title in ((ServiceSettings, "The API and the service as a whole"),
                         (RenderSettings, "The render workers"), (StorageSettings, "Storage")):
        lines += ["", f"## {title}", "", "| variable | default | meaning |", "|---|---|---|"]
        for name, field in model.model_fields.items():
            variable = f"SCREENSHOT_{name.upper()}"
            if variable in seen:
                continue
            seen.add(variable)
            meaning = (field.description or "").replace("|", "\\|")
            lines.append(f"| {variable} | {_shown_default(field)} | {meaning} |")
        if model is RenderSettings:
            lines.append(f"| {PROXY_SETTING[0]} | unset | {PROXY_SETTING[1]} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(reference(), end="")  # noqa: T201
