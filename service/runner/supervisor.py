"""`screenshot-service run`: the whole service on one machine, started and stopped as one.

A private redis-server (Unix socket only, AOF on, data under SCREENSHOT_DATA_DIR/redis) unless
SCREENSHOT_REDIS_URL is set, the API, SCREENSHOT_WORKERS render workers and the webhook deliverer as
child processes (each in its own session, so a terminal's Ctrl-C reaches only this supervisor, which
then stops them in order: API, workers, Redis). Workers and the deliverer are restarted if they die.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from render.queue.redis_client import RedisTarget, aclose
from service.embedded_redis import EmbeddedRedis
from service.organisations import OrganisationStore, new_key
from service.settings import Settings

STOP_TIMEOUT_SECONDS = 30
RESTART_BACKOFF_SECONDS = (0.5, 1.0, 2.0, 5.0, 10.0)  # before each restart of a process that keeps dying
STABLE_SECONDS = 30  # a process that ran this long starts its back-off afresh


async def _ensure_default_key(redis_url: str, settings: Settings) -> tuple[str, str | None]:
    """The access key to show, with its organisation's signing key: SCREENSHOT_ACCESS_KEY, or the default
    organisation's kept in the data dir."""
    service = settings.service
    connection = RedisTarget(redis_url).asyncio()
    try:
        store = OrganisationStore(connection)
        if service.access_key and (org := await store.ensure_configured(service)) is not None:
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


def _end_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL whatever is left of a child's process group (each child leads one): the RQ scheduler a
    deliverer forked, a worker's Chromium. Left alive, they would outlive their parent under PID 1."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


class Supervised:
    """One process `run` keeps running: when it dies its process group is ended, and it is started again
    after a back-off that grows while it keeps dying and resets once it has run for STABLE_SECONDS."""

    def __init__(self, role: str, start: Callable[[], subprocess.Popen[bytes]],
                 running: subprocess.Popen[bytes] | None = None) -> None:
        self.role = role
        self._start = start
        self.process = running or start()
        self._started = time.monotonic()
        self._failures = 0
        self._due: float | None = None  # when the restart is due, while it waits for its back-off

    def _back_off(self, now: float) -> float:
        delay = RESTART_BACKOFF_SECONDS[min(self._failures, len(RESTART_BACKOFF_SECONDS) - 1)]
        self._failures += 1
        self._due = now + delay
        return delay

    def check(self) -> None:
        """Restart the process if it died and its back-off has passed; called every supervision tick."""
        now = time.monotonic()
        if self._due is None:
            if self.process.poll() is None:
                if now - self._started >= STABLE_SECONDS:
                    self._failures = 0
                return
            _end_group(self.process)
            delay = self._back_off(now)
            print(f"{self.role} exited with {self.process.returncode}; restarting it in {delay:g} s",
                  file=sys.stderr, flush=True)
        if self._due is not None and now >= self._due:
            try:
                self.process = self._start()
            except SystemExit as failed:  # the embedded Redis did not come back
                print(f"{self.role} did not start ({failed}); retrying in {self._back_off(now):g} s",
                      file=sys.stderr, flush=True)
                return
            self._started, self._due = time.monotonic(), None


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


def unwritable(data_dir: Path) -> str | None:
    """What stops this process writing under `data_dir` (its Redis, keys and results go there), said with the
    fix; None when it can."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        probe = data_dir / f".write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except PermissionError:
        existing = next((path for path in (data_dir, *data_dir.parents) if path.exists()), data_dir)
        try:
            owner = f"{'' if existing == data_dir else f'{existing} is '}owned by uid {existing.stat().st_uid}"
        except OSError:
            owner = "not reachable"
        return (f"SCREENSHOT_DATA_DIR {data_dir} is not writable by uid {os.getuid()} ({owner}). Give it to that "
                f"user (`chown -R {os.getuid()}:{os.getgid()} <the host directory>` for a bind mount, or use a named "
                "volume), or set SCREENSHOT_DATA_DIR to a directory it may write.")
    except OSError as error:
        return f"SCREENSHOT_DATA_DIR {data_dir} cannot be used: {error.strerror or error}."
    return None


def run(settings: Settings) -> int:
    """Start everything, print how to use it, and supervise until Ctrl-C or SIGTERM."""
    service = settings.service
    data_dir = service.data_dir.absolute()
    problem = unwritable(data_dir)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
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
    api: Supervised | None = None
    children: list[Supervised] = []
    redis_server = None
    if embedded is not None:
        redis_server = Supervised("redis-server", lambda: _restarted(embedded), running=embedded.process)
    try:
        key, signing_key = asyncio.run(_ensure_default_key(redis_url, settings))
        print(f"Starting {service.workers} render worker(s) and the API ...", flush=True)
        children = [Supervised(role, functools.partial(_child, role, env))
                    for role in ["worker"] * service.workers + ["webhooks"]]
        api = Supervised("api", functools.partial(_child, "api", env))
        url = service.base_url
        if not _wait_ready(url, api.process, timeout=60):
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
            for supervised in [*([redis_server] if redis_server else []), api, *children]:
                supervised.check()
            time.sleep(0.2)
        print("Stopping ...", flush=True)
        return 0
    finally:
        _stop_children([api.process] if api is not None else [])
        _stop_children([child.process for child in children])
        if embedded is not None:
            embedded.stop()
        print("Stopped.", flush=True)


def _restarted(embedded: EmbeddedRedis) -> subprocess.Popen[bytes]:
    """The private Redis started again on its data dir (its AOF brings every key back)."""
    embedded.start()
    assert embedded.process is not None
    return embedded.process
