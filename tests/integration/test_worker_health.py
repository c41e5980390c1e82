"""Health that tells the truth: a worker whose Chromium cannot start says so, is not counted by /readyz
and takes no job; once Chromium can start it takes jobs again, with nothing restarted by hand.

The worker's Chromium is a wrapper that fails as Chromium does under a seccomp profile refusing user namespaces
(Docker's default, when an operator leaves out ours) until a flag file exists, then runs the real one."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from render.settings import RenderSettings
from tests.conftest import create_org
from tests.support.servers import ROOT, free_port, redis_server, service_env, start, stop, wait_for
from tests.support.site import Site

pytestmark = pytest.mark.browser

WRAPPER = """#!/bin/sh
if [ -e "{flag}" ]; then exec "{chromium}" "$@"; fi
echo "[FATAL:zygote_host_impl_linux.cc(127)] No usable sandbox! Update your kernel or see ..." >&2
exit 1
"""


@pytest.fixture
def broken(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], Path]]:
    """(API URL, the processes' environment, the flag that lets Chromium start): an API and one worker whose
    Chromium cannot start yet, their temporary files (heartbeats) in a directory of their own."""
    flag = tmp_path / "chromium-may-start"
    wrapper = tmp_path / "chromium"
    wrapper.write_text(WRAPPER.format(flag=flag, chromium=RenderSettings().chromium_path))
    wrapper.chmod(0o755)
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    (tmp_path / "redis").mkdir()
    with redis_server(tmp_path / "redis") as url:
        port = free_port()
        env = {**service_env(url, tmp_path, port), "SCREENSHOT_CHROMIUM_PATH": str(wrapper), "TMPDIR": str(own_tmp)}
        processes = [start("api", env), start("worker", env)]
        try:
            api = f"http://127.0.0.1:{port}"
            wait_for(lambda: httpx.get(f"{api}/healthz").status_code == 200, 60, "the API")
            yield api, env, flag
        finally:
            stop(processes)


def healthcheck(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", "healthcheck", "--role", "worker"], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_a_worker_whose_chromium_cannot_start_is_unhealthy_until_it_can(
        broken: tuple[str, dict[str, str], Path], site: Site) -> None:
    api, env, flag = broken
    def reason() -> str:
        return "".join(path.read_text() for path in Path(env["TMPDIR"]).glob("*.unhealthy"))

    wait_for(lambda: "could not start" in reason(), 60, "the worker's reason")
    assert "Chromium sandboxing failed" in reason(), reason()  # what Playwright makes of "No usable sandbox!"
    sick = healthcheck(env)
    assert sick.returncode == 1, sick.stdout
    assert "cannot render" in sick.stderr and "seccomp-chromium.json" in sick.stderr, sick.stderr
    ready = httpx.get(f"{api}/readyz")
    assert ready.status_code == 503 and ready.json()["workers"] == 0, ready.text
    org = asyncio.run(create_org(env["SCREENSHOT_REDIS_URL"], quota=100, concurrency=2))
    waited = httpx.get(f"{api}/v1/screenshot/take", params={
        "access_key": org.access_key, "url": site.url("/colours.html"), "timeout": "1"}, timeout=60)
    # No worker takes it (none can render): the request runs out of time, it is never a crash of ours.
    assert waited.status_code >= 400 and waited.json()["error_code"] != "internal_application_error", waited.text
    flag.touch()  # the operator fixes the profile; the worker's next probe starts Chromium
    wait_for(lambda: httpx.get(f"{api}/readyz").json()["workers"] == 1, 60, "the worker, ready again")
    assert healthcheck(env).returncode == 0
    assert not list(Path(env["TMPDIR"]).glob("*.unhealthy"))
    done = httpx.get(f"{api}/v1/screenshot/take", params={
        "access_key": org.access_key, "url": site.url("/colours.html"), "viewport_width": "200",
        "viewport_height": "100"}, timeout=60)
    assert done.status_code == 200, done.text
