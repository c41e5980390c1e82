"""What the image relies on, checked on this machine (no Docker engine runs here): the health check of
each role, and Chromium's sandbox as a non-root user under deploy/seccomp-chromium.json."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from tests.support.images import decode
from tests.support.servers import ROOT, RunningService

pytestmark = pytest.mark.browser
PROFILE = json.loads((ROOT / "deploy" / "seccomp-chromium.json").read_text())
NOBODY = 65534
KEYCTL = 250  # x86_64 system call number


def healthcheck(service: RunningService, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", "healthcheck", *arguments], env=service.env,
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_health_check_of_each_role(service: RunningService) -> None:
    for role in ("api", "worker", "webhooks"):
        result = healthcheck(service, "--role", role)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"healthy ({role})"
    # An API on another port is not this one: unhealthy, with the reason.
    elsewhere = subprocess.run([sys.executable, "-m", "service.cli", "healthcheck", "--role", "api"],
                               env={**service.env, "SCREENSHOT_PORT": "1"}, cwd=ROOT, capture_output=True,
                               text=True, timeout=60)
    assert elsewhere.returncode == 1 and "unhealthy (api): http://127.0.0.1:1/healthz" in elsewhere.stderr


def test_health_check_finds_the_role_running_here(tmp_path: Path) -> None:
    from service.cli.healthcheck import running_role

    def process(pid: int, *argv: str) -> None:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cmdline").write_bytes(b"\0".join(arg.encode() for arg in argv) + b"\0")

    process(1, "/usr/bin/tini", "--", "screenshot-service", "worker")
    process(7, "/opt/venv/bin/python3", "/opt/venv/bin/screenshot-service", "worker")
    assert running_role(tmp_path) == "worker"
    (tmp_path / "self").mkdir()  # not a process
    process(9, "/opt/venv/bin/screenshot-service", "healthcheck")
    assert running_role(tmp_path) == "worker"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert running_role(empty) is None


def seccomp_filter(extra_denied: Iterable[str] = ()) -> Callable[[], None]:
    """A pre-exec hook loading the profile (as Docker would) plus `extra_denied`."""
    seccomp = pytest.importorskip("pyseccomp")

    def load() -> None:
        rules = seccomp.SyscallFilter(seccomp.ALLOW)
        for arch in (seccomp.Arch.X86, seccomp.Arch.X32):
            rules.add_arch(arch)
        for rule in PROFILE["syscalls"]:
            assert rule["action"] == "SCMP_ACT_ERRNO"
            for name in [*rule["names"], *extra_denied]:
                try:
                    rules.add_rule(seccomp.ERRNO(rule["errnoRet"]), name)
                except (RuntimeError, ValueError):
                    pass  # not a system call of this architecture (vm86 on x86_64): Docker skips it too
        rules.load()

    return load


@pytest.fixture
def nobody_home() -> Iterator[Path]:
    """A directory `nobody` can use (pytest's tmp_path is private to root)."""
    home = Path(tempfile.mkdtemp(prefix="screenshot-nobody-"))
    os.chmod(home, 0o777)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def sandboxed_screenshot(base: Path, name: str, extra_denied: Iterable[str] = ()) -> subprocess.CompletedProcess[str]:
    """The workers' Chromium (Debian's headless shell) as `nobody`, sandbox on, under the profile: a
    screenshot of a red page."""
    home = base / name
    home.mkdir()
    os.chmod(home, 0o777)
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         "/usr/lib/chromium/chromium-headless-shell", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update",
         f"--user-data-dir={home}/profile", "--window-size=200,100", f"--screenshot={home}/shot.png",
         "data:text/html,<body style='margin:0;background:rgb(255,0,0)'>"],
        preexec_fn=seccomp_filter(extra_denied), env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=90)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="switching to another user needs root")
def test_chromium_keeps_its_sandbox_as_non_root_under_the_seccomp_profile(nobody_home: Path) -> None:
    result = sandboxed_screenshot(nobody_home, "profile")
    assert result.returncode == 0, result.stderr[-2000:]
    image = decode((nobody_home / "profile" / "shot.png").read_bytes())
    assert image.getpoint(100, 50)[:3] == [255, 0, 0]
    # Docker's default profile refuses unshare(CLONE_NEWUSER); so would this one without its allowance,
    # and Chromium then refuses to start sandboxed: the profile is what makes the sandbox possible.
    refused = sandboxed_screenshot(nobody_home, "default-like", extra_denied=["unshare"])
    assert refused.returncode != 0 and not (nobody_home / "default-like" / "shot.png").exists()
    assert "sandbox" in refused.stderr.lower()


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="system call number of x86_64")
def test_the_seccomp_profile_refuses_what_a_worker_never_needs() -> None:
    probe = [sys.executable, "-c", "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
             f"r = libc.syscall({KEYCTL}, 0, -3, 0); sys.exit(0 if r >= 0 else ctypes.get_errno())"]
    assert subprocess.run(probe, timeout=30).returncode == 0  # allowed without the profile
    assert subprocess.run(probe, preexec_fn=seccomp_filter(), timeout=30).returncode == errno.EPERM


READ_ONLY_ROOT = """set -e
mount --make-rprivate /
mount -t tmpfs tmpfs /mnt                    # a holding place for what stays reachable
mkdir /mnt/out /mnt/code
mount --bind "$OUT" /mnt/out                 # where the capture goes
mount --bind "$ROOT" /mnt/code               # the checkout (CI clones it under /tmp)
mount -t tmpfs tmpfs /tmp                    # the one writable place, as the worker's emptyDir
mkdir -p "$ROOT"
mount --bind /mnt/code "$ROOT"
mount -o remount,bind,ro "$ROOT"
mount -o remount,bind,ro /
if touch "$ROOT/.written" 2>/dev/null || touch /.written 2>/dev/null; then echo "writable"; exit 3; fi
printf '<body style="margin:0;background:#0000ff"></body>' > /tmp/page.html
HOME=/tmp/home XDG_CACHE_HOME=/tmp/cache "$PYTHON" -m service.cli take /tmp/page.html -o /mnt/out/page.png \
  --viewport-width 320 --viewport-height 100
"""


def test_a_capture_renders_on_a_read_only_root_file_system(tmp_path: Path) -> None:
    """As the Kubernetes workers run (readOnlyRootFilesystem, /tmp an emptyDir, HOME and caches there): the
    capture pipeline writes nowhere else. A private mount namespace with / remounted read-only."""
    env = {**os.environ, "OUT": str(tmp_path), "ROOT": str(ROOT), "PYTHON": sys.executable}
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", READ_ONLY_ROOT],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    image = decode((tmp_path / "page.png").read_bytes())
    assert (image.width, image.height) == (320, 100) and image.getpoint(10, 10)[:3] == [0, 0, 255]
