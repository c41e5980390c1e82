"""A `screenshot-service run` instance started as a user starts it, and the processes it runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT, free_port


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCREENSHOT_")}
    env.update({"SCREENSHOT_DATA_DIR": str(data_dir), "SCREENSHOT_ALLOW_PRIVATE_NETWORKS": "true",
                "PYTHONPATH": str(ROOT), **extra})
    return env


def cli(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=check)


def processes_with(marker: str) -> list[int]:
    """PIDs whose environment mentions `marker` (every process `run` starts inherits its data dir)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def start_run(tmp_path: Path, **extra: str) -> tuple[subprocess.Popen[str], str, Path, int, dict[str, str]]:
    """`screenshot-service run` (one worker, unless `extra` settings say otherwise) started on a data dir of
    `tmp_path` and ready: the process, the banner it printed, its data dir, port and environment."""
    data_dir = tmp_path / "run-data"
    port = free_port()
    env = cli_env(data_dir, **{"SCREENSHOT_PORT": str(port), "SCREENSHOT_WORKERS": "1", **extra})
    process = subprocess.Popen([sys.executable, "-m", "service.cli", "run"], env=env, cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    assert process.stdout is not None
    deadline = time.monotonic() + 90
    while not any("Press Ctrl-C" in line for line in lines):
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise AssertionError("".join(lines))
        lines.append(process.stdout.readline())
    return process, "".join(lines), data_dir, port, env


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
