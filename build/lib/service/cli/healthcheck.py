"""`screenshot-service healthcheck`: is this machine's (or container's) screenshot-service process healthy?

One image runs every role, so the check first finds which role runs here, then asks the question that
fits it: the API answers /healthz, a render worker touched its heartbeat file within the last
HEARTBEAT_WITHIN_SECONDS (its browser loop is turning and its Chromium can render; when it cannot, the reason it
wrote says what to fix), `run` both, the webhook deliverer reaches Redis.
"""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from render.queue.records import fresh_local_heartbeats, local_unhealthy_reasons
from render.queue.redis_client import RedisTarget
from service.embedded_redis import EmbeddedRedis
from service.settings import Settings

ROLES = ("run", "api", "worker", "webhooks")
HEARTBEAT_WITHIN_SECONDS = 15
PROBE_TIMEOUT_SECONDS = 5


def running_role(proc: Path = Path("/proc")) -> str | None:
    """The role of the first `screenshot-service <role>` process found (other than this check)."""
    for entry in sorted(proc.glob("[0-9]*"), key=lambda path: int(path.name)):
        if entry.name == str(os.getpid()):
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or not ours to read
        for position, argument in enumerate(argv[:-1]):
            if argument.endswith(b"screenshot-service"):
                role = argv[position + 1].decode(errors="replace")
                if role in ROLES:
                    return role
    return None


def check(settings: Settings, role: str) -> str:
    """'' when healthy, else what is wrong (one line)."""
    if role in ("api", "run"):
        url = f"http://127.0.0.1:{settings.service.port}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_SECONDS) as response:
                if response.status != 200:
                    return f"{url} answered {response.status}"
        except OSError as error:
            return f"{url}: {error}"
        return "" if role == "api" else check(settings, "worker")  # `run`: its workers can render too
    if role == "worker":
        if fresh_local_heartbeats(HEARTBEAT_WITHIN_SECONDS):
            return ""
        reasons = local_unhealthy_reasons(HEARTBEAT_WITHIN_SECONDS)
        if reasons:
            return f"render worker cannot render: {reasons[0]}"
        return f"no render worker heartbeat in the last {HEARTBEAT_WITHIN_SECONDS} s"
    if role == "webhooks":
        # Under `run` the deliverer's Redis is the private one in the data dir, not SCREENSHOT_REDIS_URL.
        target = settings.service.redis() if settings.service.redis_url else RedisTarget(
            EmbeddedRedis(settings.service.data_dir).url)
        try:  # one attempt: the probe asks whether Redis answers now
            target.sync(socket_timeout=PROBE_TIMEOUT_SECONDS, retry=Retry(NoBackoff(), 0)).ping()
        except (redis.RedisError, ValueError) as error:
            return f"Redis unreachable: {error}"
        return ""
    raise ValueError(f"unknown role {role!r}")
