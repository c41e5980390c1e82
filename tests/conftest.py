"""Fixtures that start real servers on free ports and always stop them.

- `redis_url`: a redis-server of the session's own.
- `site`: the local test site (tests/site.py).
- `service`: the API and two render workers as real processes, as `screenshot-service` starts them.
- `org`: a fresh organisation (keys, quota, concurrency) for one test.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis
import redis.asyncio as aioredis

from service.organisations import OrganisationStore
from tests.site import Site

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, redis.RedisError, httpx.HTTPError):
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{what} did not become ready within {timeout} s")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    data = tmp_path_factory.mktemp("redis")
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data), "--save", "",
         "--appendonly", "no", "--loglevel", "warning"], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_for(lambda: redis.Redis.from_url(url).ping(), 10, "redis-server")
        yield url
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="session")
def site() -> Iterator[Site]:
    with Site() as running:
        yield running


@dataclass
class RunningService:
    url: str
    redis_url: str
    data_dir: Path
    env: dict[str, str]


def service_env(redis_url: str, data_dir: Path, port: int, **extra: str) -> dict[str, str]:
    """Environment for service processes under test: private networks allowed (the site is local)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCREENSHOT_")}
    env.update({
        "SCREENSHOT_REDIS_URL": redis_url, "SCREENSHOT_PORT": str(port), "SCREENSHOT_HOST": "127.0.0.1",
        "SCREENSHOT_DATA_DIR": str(data_dir), "SCREENSHOT_ALLOW_PRIVATE_NETWORKS": "true",
        "SCREENSHOT_LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT),
        # Names under .invalid fail inside Chromium without asking any DNS server.
        "SCREENSHOT_CHROMIUM_ARGS": "--host-resolver-rules='MAP *.invalid ~NOTFOUND'",
    })
    env.update(extra)
    return env


def start(role: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "service.cli", role], env=env, cwd=ROOT,
                            start_new_session=True)


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(5)


@pytest.fixture(scope="session")
def service(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    port = free_port()
    data_dir = tmp_path_factory.mktemp("service")
    env = service_env(redis_url, data_dir, port, SCREENSHOT_MAX_BODY_BYTES="65536")
    processes = [start("worker", env), start("worker", env), start("api", env)]
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: httpx.get(f"{url}/readyz").json()["workers"] >= 2, 60, "the API and workers")
        yield RunningService(url, redis_url, data_dir, env)
    finally:
        stop(processes)


@dataclass
class Org:
    id: str
    access_key: str
    signing_key: str


async def _create_org(redis_url: str, **kwargs: object) -> Org:
    connection = aioredis.Redis.from_url(redis_url)
    try:
        created = await OrganisationStore(connection).create("test", **kwargs)  # type: ignore[arg-type]
    finally:
        await connection.aclose()
    return Org(created.organisation.id, created.access_key, created.organisation.signing_key or "")


@pytest.fixture
def make_org(redis_url: str):  # type: ignore[no-untyped-def]
    """Factory: `make_org(quota=5, concurrency=1, require_signature=True)`."""

    def make(quota: int = 1000, concurrency: int = 10, require_signature: bool = False) -> Org:
        return asyncio.run(_create_org(redis_url, quota=quota, concurrency=concurrency,
                                       require_signature=require_signature))

    return make


@pytest.fixture
def org(make_org) -> Org:  # type: ignore[no-untyped-def]
    return make_org()


@pytest.fixture
def client(service: RunningService) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=120) as http:
        yield http
