"""Starting and stopping the real parts (redis-server, API, workers) on free ports.

Shared by the test fixtures and the benchmark, so both run the service exactly as deployed.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import boto3
import httpx
import redis

from render.browser.chromium import PAGE_SIZE
from render.worker.cpus import process_tree  # noqa: F401 (tests import it from here)
from storage.s3 import S3Storage
from tests.support.pages.annoyances import TLS_HOSTS
from tests.support.tls import authority

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, redis.RedisError, httpx.HTTPError, KeyError):
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{what} did not become ready within {timeout} s")


@contextlib.contextmanager
def redis_server(data_dir: Path) -> Iterator[str]:
    """A redis-server of its own on a free loopback port; yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir), "--save", "",
         "--appendonly", "no", "--loglevel", "warning"], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_for(lambda: redis.Redis.from_url(url).ping(), 10, "redis-server")
        yield url
    finally:
        process.terminate()
        process.wait(10)


def metric(http: httpx.Client, line_start: str) -> float:
    """A sample of /metrics by its name and labels as written, e.g. `screenshot_browser_restarts_total`."""
    for line in http.get("/metrics").text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.split()[-1])
    raise KeyError(line_start)


def listening_sockets(pid: int) -> int:
    """How many TCP sockets process `pid` listens on (its fds matched against /proc/net/tcp's LISTEN entries)."""
    listening: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A":  # TCP_LISTEN
                    listening.add(fields[9])
    owned = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                owned.add(target[len("socket:["):-1])
    return len(owned & listening)


def memory_kib(pid: int, field: str) -> int:
    """`field` (Pss, Rss) of one process from /proc/<pid>/smaps_rollup, in KiB; 0 once it is gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    return 0


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: Iterable[int]) -> float:
    """User and system time of these processes and of the children each has reaped (utime, stime, cutime, cstime of
    /proc/<pid>/stat), in seconds; a process that has ended counts nothing."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(value) for value in fields[11:15])
    return total / TICKS


PAGE_FRAME_MASK = (1 << 55) - 1  # bits 0-54 of a pagemap entry


def resident_pages(pid: int) -> set[int] | None:
    """The physical pages (frame numbers) `pid` has resident now, from /proc/<pid>/pagemap; None when this
    process may not see frame numbers (they read as 0 without CAP_SYS_ADMIN). Counting the union over a
    process tree gives its RSS with every shared page counted once, as a container's memory limit sees it."""
    pages: set[int] = set()
    with contextlib.suppress(OSError), open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        mapping = range(0)
        for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
            if re.match(r"[0-9a-f]+-[0-9a-f]+ ", line):
                start, end = (int(address, 16) // PAGE_SIZE for address in line.split()[0].split("-"))
                mapping = range(start, end)
            elif line.startswith("Rss:") and int(line.split()[1]) > 0:  # only what has pages resident
                pagemap.seek(mapping.start * 8)
                for (entry,) in struct.iter_unpack("<Q", pagemap.read(len(mapping) * 8)):
                    if entry >> 63:  # present
                        pages.add(entry & PAGE_FRAME_MASK)
    return None if pages == {0} else pages


JOB_SECRET = secrets.token_hex(32)  # what `run` generates; the API and workers of a test service share it


def service_env(redis_url: str, data_dir: Path, port: int, **extra: str) -> dict[str, str]:
    """Environment for service processes on this machine: private networks allowed (local sites)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCREENSHOT_")}
    env.update({
        "SCREENSHOT_REDIS_URL": redis_url, "SCREENSHOT_PORT": str(port), "SCREENSHOT_HOST": "127.0.0.1",
        "SCREENSHOT_DATA_DIR": str(data_dir), "SCREENSHOT_ALLOW_PRIVATE_NETWORKS": "true",
        "SCREENSHOT_LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT),
        # Third-party hosts of the test pages (ad servers, trackers, consent platforms, chat widgets)
        # are this machine, and their HTTPS certificates come from the run's own CA.
        "SCREENSHOT_RESOLVE_OVERRIDES": ",".join(
            f"{host}=127.0.0.1" for host in ["ad.doubleclick.net", "publisher.test", *TLS_HOSTS]),
        "SCREENSHOT_CA_CERTIFICATES": str(authority().ca_file),
        "SCREENSHOT_JOB_SECRET": JOB_SECRET,
    })
    env.update(extra)
    return env


def start(role: str, env: dict[str, str], log: IO[bytes] | None = None) -> subprocess.Popen[bytes]:
    """`screenshot-service <role>` in its own session (its output to `log` when given)."""
    return subprocess.Popen([sys.executable, "-m", "service.cli", role], env=env, cwd=ROOT, start_new_session=True,
                            stdout=log, stderr=subprocess.STDOUT if log else None)


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM, then SIGKILL of each process group (Chromium included)."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)


@dataclass
class RunningService:
    url: str  # the first API
    redis_url: str
    data_dir: Path
    env: dict[str, str]
    processes: dict[str, subprocess.Popen[bytes]]  # by role: worker0, worker1, ..., webhooks, api, api1, ...
    urls: list[str] = field(default_factory=list)  # every API, in the order of their roles
    log: IO[bytes] | None = None  # where the processes write, restarted ones too

    def restart(self, role: str, *, kill: bool = False) -> None:
        """Stop one process (SIGKILL with `kill`: a crash) and start it again."""
        process = self.processes[role]
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        else:
            stop([process])
        env = self.env
        if role.startswith("api") and role != "api":
            env = {**env, "SCREENSHOT_PORT": self.urls[int(role[3:])].rsplit(":", 1)[1]}
        self.processes[role] = start(role.rstrip("0123456789"), env, self.log)


@contextlib.contextmanager
def running_service(redis_url: str, data_dir: Path, workers: int, log: IO[bytes] | None = None, apis: int = 1,
                    **extra: str) -> Iterator[RunningService]:
    """`apis` API processes, `workers` render workers and the webhook deliverer on one Redis, ready to serve
    (their output to `log` when given)."""
    ports = [free_port() for _ in range(apis)]
    env = service_env(redis_url, data_dir, ports[0], **extra)
    processes = {f"worker{n}": start("worker", env, log) for n in range(workers)}
    processes["webhooks"] = start("webhooks", env, log)
    for n, port in enumerate(ports):
        processes["api" if n == 0 else f"api{n}"] = start("api", {**env, "SCREENSHOT_PORT": str(port)}, log)
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    running = RunningService(urls[0], redis_url, data_dir, env, processes, urls, log)
    try:
        for url in urls:
            wait_for(lambda url=url: httpx.get(f"{url}/readyz").json()["workers"] >= workers, 60,
                     "the API and workers")
        yield running
    finally:
        stop(list(running.processes.values()))


# Credentials for the local S3 server only; no test may ever reach AWS (nor the instance metadata address).
S3_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
          "AWS_EC2_METADATA_DISABLED": "true"}


@dataclass
class S3Server:
    """moto's S3-compatible server on a free loopback port."""

    url: str

    def new_bucket(self) -> str:
        """A fresh bucket (each test gets its own)."""
        name = f"test-{os.urandom(6).hex()}"
        boto3.client("s3", endpoint_url=self.url, region_name="us-east-1").create_bucket(Bucket=name)
        return name

    def storage(self, bucket: str) -> S3Storage:
        return S3Storage(bucket, endpoint_url=self.url, region="us-east-1", path_style=True)

    def service_env(self, bucket: str) -> dict[str, str]:
        """Settings that make a service store in `bucket`."""
        return {**S3_ENV, "SCREENSHOT_STORAGE_BACKEND": "s3", "SCREENSHOT_S3_BUCKET": bucket,
                "SCREENSHOT_S3_ENDPOINT_URL": self.url, "SCREENSHOT_S3_REGION": "us-east-1",
                "SCREENSHOT_S3_PATH_STYLE": "true"}


@contextlib.contextmanager
def s3_server() -> Iterator[S3Server]:
    os.environ.update(S3_ENV)
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: httpx.get(url + "/moto-api/").status_code == 200, 30, "moto's S3 server")
        yield S3Server(url)
    finally:
        process.terminate()
        process.wait(10)
