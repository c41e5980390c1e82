"""Work the integration tests start in the background when the session starts, so that what is only waiting
(a 65 s capture that waits for its page) overlaps the other tests instead of adding to the run. Each runs on a
service of its own (own Redis, own workers), so it takes no worker of the shared one; its test joins it and
checks what came back."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.conftest import ROOT, create_org
from tests.support.servers import RunningService, free_port, redis_server, running_service, wait_for
from tests.support.site import Site

TS_CLIENT = ROOT / "tests" / "sdk" / "mcp_client.mjs"
TYPESCRIPT_TEST = "test_a_standard_typescript_client_completes_a_65_s_capture_and_cancels_a_queued_one"
LATE_SECONDS = 65  # past the TypeScript SDK's default request timeout (60 s)
# A page that shows what the capture waits for only after LATE_SECONDS: green, with #ready.
LATE_PAGE = ("<style>html, body { margin: 0; height: 100%; background: rgb(255, 255, 255); }</style><script>"
             f"setTimeout(() => {{ document.body.style.background = 'rgb(0, 255, 0)';"
             f" document.body.innerHTML = '<div id=ready>ready</div>'; }}, {LATE_SECONDS * 1000});</script>")
SMALL = {"viewport_width": 200, "viewport_height": 100}
TS_WORKERS = 2  # one long capture per transport keeps both busy: a third job waits in the queue


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SCREENSHOT_")}


@dataclass
class TypeScriptRun:
    """The official TypeScript MCP client's scenario (tests/sdk/mcp_client.mjs), running or done."""

    process: subprocess.Popen[bytes]
    service: RunningService
    key: str
    sides: int

    def result(self) -> tuple[int, dict[str, object] | None, str]:
        """(exit status, what it printed, the end of its error output), once it is done."""
        out, err = self.process.communicate(timeout=LATE_SECONDS + 180)
        text = err.decode(errors="replace")[-3000:]
        return self.process.returncode, (json.loads(out) if self.process.returncode == 0 else None), text

    def used(self) -> int:
        answer = httpx.get(f"{self.service.url}/v1/screenshot/usage", params={"access_key": self.key}, timeout=30)
        return int(answer.json()["used"])


@pytest.fixture(scope="session", autouse=True)
def typescript_mcp_run(request: pytest.FixtureRequest, site: Site, tmp_path_factory: pytest.TempPathFactory
                       ) -> Iterator[TypeScriptRun | None]:
    """Started with the session when its test is among those to run (else nothing)."""
    if not any(item.name == TYPESCRIPT_TEST for item in request.session.items):
        yield None
        return
    data = tmp_path_factory.mktemp("typescript-mcp")
    (data / "redis").mkdir()
    with redis_server(data / "redis") as redis_url, running_service(redis_url, data, workers=TS_WORKERS) as service:
        org = asyncio.run(create_org(redis_url, quota=100, concurrency=20))
        port = free_port()
        mcp_http = subprocess.Popen([sys.executable, "-m", "service.cli", "mcp", "--transport", "http", "--api",
                                     service.url, "--port", str(port)], cwd=ROOT, env=environment())
        try:
            wait_for(lambda: httpx.get(f"http://127.0.0.1:{port}/", timeout=2) is not None, 30, "the MCP server")
            stdio = {"transport": "stdio", "command": sys.executable, "args": [
                "-m", "service.cli", "mcp", "--api", service.url, "--access-key", org.access_key],
                "env": environment(), "cwd": str(ROOT)}
            http = {"transport": "http", "url": f"http://127.0.0.1:{port}/mcp", "key": org.access_key}
            plan = {"sides": [stdio, http], "queued": {"url": site.url("/colours.html"), **SMALL},
                    "long": {"html": LATE_PAGE, "wait_for_selector": "#ready", "timeout": 90, **SMALL}}
            node = subprocess.Popen(["node", str(TS_CLIENT), json.dumps(plan)], cwd=ROOT, env=environment(),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                yield TypeScriptRun(node, service, org.access_key, 2)
            finally:
                if node.poll() is None:
                    node.kill()
                    node.communicate()
        finally:
            mcp_http.terminate()
            mcp_http.wait(10)
