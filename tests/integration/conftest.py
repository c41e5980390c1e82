"""Work the integration tests start in the background when the session starts, so that what is only waiting
(a 65 s capture that waits for its page) or runs apart (the contract run, in a network namespace of its own)
overlaps the other tests instead of adding to the run (the run keeps about one of the two cores busy on
average). Each runs on a service of its own (own Redis, own workers), so it takes no worker of the shared one;
its test joins it and checks what came back."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.cluster.network import available
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
    directory: Path  # client.out, client.err

    def result(self) -> tuple[int, dict[str, object] | None, str]:
        """(exit status, what it printed, the end of its error output), once it is done."""
        self.process.wait(timeout=LATE_SECONDS + 180)
        printed = (self.directory / "client.out").read_bytes()
        errors = (self.directory / "client.err").read_text(errors="replace")[-3000:]
        return self.process.returncode, (json.loads(printed) if self.process.returncode == 0 else None), errors

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
            with (data / "client.out").open("wb") as out, (data / "client.err").open("wb") as err:
                node = subprocess.Popen(["node", str(TS_CLIENT), json.dumps(plan)], cwd=ROOT, env=environment(),
                                        stdout=out, stderr=err)  # files: nobody reads a pipe while it runs
            try:
                yield TypeScriptRun(node, service, org.access_key, 2, data)
            finally:
                if node.poll() is None:
                    node.kill()
                    node.wait(10)
        finally:
            mcp_http.terminate()
            mcp_http.wait(10)


CONTRACT_TEST = "test_schemathesis_finds_no_contract_failure"
CONTRACT_EXAMPLES = 3  # per operation in fuzzing (coverage makes its own: about 14,000 cases in all)
CONTRACT_SEED = 51  # a failure repeats with the same draws
CONTRACT_WORKERS = 2  # schemathesis's concurrent clients
# Per request, and the answer's time its `max_response_time` check (part of "all") allows: the CLI's default is
# 10 s for both, but the coverage phase ignores the short values the configuration gives and sends the schema's
# defaults too, a 5 s recording among them, which on a loaded machine takes over 10 s. So the check says "no hang",
# not how fast (the bench judges speed).
CONTRACT_REQUEST_TIMEOUT = 60


@dataclass
class ContractRun:
    """tests/support/contract_run.py running in a network namespace of its own, or why it could not."""

    process: subprocess.Popen[bytes] | None
    directory: Path
    unavailable: str = ""

    def result(self) -> tuple[int, str]:
        """(the CLI's exit status, its output), once it is done."""
        assert self.process is not None
        self.process.wait(timeout=840)
        written = self.directory / "output.txt"
        if not written.exists():  # it never got to the CLI: what its processes said
            written = self.directory / "processes.log"
        return self.process.returncode, written.read_text(errors="replace")


@pytest.fixture(scope="session", autouse=True)
def contract_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[ContractRun | None]:
    """Started with the session when tests/integration/test_contract.py is to run (else nothing)."""
    if not any(item.name == CONTRACT_TEST for item in request.session.items):
        yield None
        return
    directory = tmp_path_factory.mktemp("contract")
    why = available()
    if why:
        yield ContractRun(None, directory, why)
        return
    with (directory / "processes.log").open("wb") as log:  # a file, not a pipe nobody reads while it runs
        process = subprocess.Popen(
            ["unshare", "--net", sys.executable, "-m", "tests.support.contract_run", str(directory),
             "--max-examples", str(CONTRACT_EXAMPLES), "--seed", str(CONTRACT_SEED), "--workers",
             str(CONTRACT_WORKERS), "--request-timeout", str(CONTRACT_REQUEST_TIMEOUT), "--max-response-time",
             str(CONTRACT_REQUEST_TIMEOUT)],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield ContractRun(process, directory)
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(60)
