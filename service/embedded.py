"""`screenshot-service run`: the whole service on one machine, started and stopped as one.

A private redis-server (Unix socket only, AOF on, data under SCREENSHOT_DATA_DIR/redis) unless
SCREENSHOT_REDIS_URL is set, the API, SCREENSHOT_WORKERS render workers and the webhook deliverer as
child processes (each in its own session, so a terminal's Ctrl-C reaches only this supervisor, which
then stops them in order: API, workers, Redis). Workers and the deliverer are restarted if they die.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import redis

from render.queue.redis_client import RedisTarget, aclose
from service.organisations import OrganisationStore, new_key
from service.settings import Settings

STOP_TIMEOUT_SECONDS = 30
UNIX_SOCKET_PATH_MAX = 100


class EmbeddedRedis:
    """A private redis-server for one data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.dir = (data_dir / "redis").absolute()
        self.socket = self.dir / "redis.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def running(self) -> bool:
        """True when a redis-server already answers on this data dir's socket."""
        if not self.socket.exists():
            return False
        try:
            return bool(redis.Redis(unix_socket_path=str(self.socket), socket_timeout=1).ping())
        except (redis.RedisError, OSError):
            return False

    def start(self) -> str:
        if shutil.which("redis-server") is None:
            raise SystemExit("redis-server is not installed: run `make run` (it installs it) or set "
                             "SCREENSHOT_REDIS_URL to an existing Redis")
        if len(str(self.socket)) > UNIX_SOCKET_PATH_MAX:
            raise SystemExit(f"the data dir path is too long for a Unix socket ({self.socket}); set "
                             "SCREENSHOT_DATA_DIR to a shorter path")
        if self.running():
            raise SystemExit(f"another instance is already using {self.dir}; stop it or set "
                             "SCREENSHOT_DATA_DIR to another directory")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", str(self.socket), "--unixsocketperm", "700",
             "--dir", str(self.dir), "--appendonly", "yes", "--save", "", "--daemonize", "no",
             "--loglevel", "warning", "--logfile", str(self.dir / "redis.log")],
            start_new_session=True, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while not self.running():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"redis-server did not start; see {self.dir / 'redis.log'}")
            time.sleep(0.05)
        return self.url

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        # SIGTERM is redis-server's graceful shutdown: it flushes the AOF, then exits.
        self.process.terminate()
        try:
            self.process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


async def _ensure_default_key(redis_url: str, settings: Settings) -> tuple[str, str | None]:
    """The access key to show, with its organisation's signing key: SCREENSHOT_ACCESS_KEY, or the default
    organisation's kept in the data dir."""
    service = settings.service
    connection = RedisTarget(redis_url).asyncio()
    try:
        store = OrganisationStore(connection)
        if service.access_key:
            org = await store.ensure("default", service.access_key, signing_key=service.signing_key,
                                     quota=service.default_quota, concurrency=service.default_concurrency,
                                     require_signature=service.require_signature)
            return service.access_key, org.signing_key
        key_file = service.data_dir.absolute() / "access_key"
        if key_file.exists():
            key = key_file.read_text().strip()
            if (found := await store.by_access_key(key)) is not None:
                return key, found.signing_key
        key = new_key()
        created = await store.create("default", quota=service.default_quota,
                                     concurrency=service.default_concurrency, access_key=key)
        key_file.parent.mkdir(parents=True, exist_ok=True)
        key_file.write_text(key + "\n")
        key_file.chmod(0o600)
        return key, created.organisation.signing_key
    finally:
        await aclose(connection)


def _child(role: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "service.cli", role], env=env, start_new_session=True,
                            stdin=subprocess.DEVNULL)


def _wait_ready(url: str, api: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if api.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def _stop_children(children: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to each child (a worker finishes its job and closes Chromium), then SIGKILL of the
    whole process group for anything left."""
    for child in children:
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
    for child in children:
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        # Chromium and its helpers live in the child's group: make sure none outlives it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(5)


def run(settings: Settings) -> int:
    """Start everything, print how to use it, and supervise until Ctrl-C or SIGTERM."""
    service = settings.service
    data_dir = service.data_dir.absolute()
    embedded = None
    redis_url = service.redis_url
    if not redis_url:
        embedded = EmbeddedRedis(data_dir)
        print(f"Starting private Redis under {embedded.dir} ...", flush=True)
        redis_url = embedded.start()
    stop = {"requested": False}

    def request_stop(signum: int, frame: object) -> None:
        stop["requested"] = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    env = {**os.environ, "SCREENSHOT_REDIS_URL": redis_url, "SCREENSHOT_DATA_DIR": str(data_dir),
           # Kept in memory only: it lets the API hand callers' vision keys to the workers sealed.
           "SCREENSHOT_JOB_SECRET": settings.render.job_secret or secrets.token_hex(32)}
    api: subprocess.Popen[bytes] | None = None
    workers: list[subprocess.Popen[bytes]] = []
    try:
        key, signing_key = asyncio.run(_ensure_default_key(redis_url, settings))
        print(f"Starting {service.workers} render worker(s) and the API ...", flush=True)
        workers = [_child("worker", env) for _ in range(service.workers)] + [_child("webhooks", env)]
        roles = ["worker"] * service.workers + ["webhooks"]
        api = _child("api", env)
        url = service.base_url
        if not _wait_ready(url, api, timeout=60):
            print(f"error: the API did not become ready at {url}/readyz (is port {service.port} free? set "
                  "SCREENSHOT_PORT)", file=sys.stderr)
            return 1
        print(f"\nscreenshot-service is running at {url}\n"
              f"  access key:  {key}\n"
              f"  signing key: {signing_key} (signed links, the official SDKs; `screenshot-service keys show` "
              "prints it again)\n"
              f"  try:         curl -o example.png '{url}/v1/screenshot/take?url=https://example.com"
              f"&access_key={key}'\n"
              f"  playground:  {url}/playground (paste the access key)\n"
              f"  docs:        {url}/docs\n"
              "Press Ctrl-C to stop.", flush=True)
        while not stop["requested"]:
            if api.poll() is not None:
                print("error: the API process exited; stopping", file=sys.stderr)
                return 1
            for index, worker in enumerate(workers):
                if worker.poll() is not None:
                    print(f"{roles[index]} exited with {worker.returncode}; restarting it", file=sys.stderr)
                    workers[index] = _child(roles[index], env)
            time.sleep(0.2)
        print("Stopping ...", flush=True)
        return 0
    finally:
        _stop_children([p for p in [api] if p is not None])
        _stop_children(workers)
        if embedded is not None:
            embedded.stop()
        print("Stopped.", flush=True)
