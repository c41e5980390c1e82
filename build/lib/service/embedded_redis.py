"""The private redis-server of one data directory (`screenshot-service run` starts it; the one-shot commands
and the healthcheck find it by its socket there)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import redis

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
