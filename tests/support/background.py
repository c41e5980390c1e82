"""Work started with the test run rather than by its test: what only waits (a 65 s capture, pip on the package
index) or runs apart (the contract run, in a network namespace of its own) overlaps the other tests instead of
adding to the run (which keeps about one of the two cores busy on average).

The process that hands out the tests (pytest-xdist's controller, or pytest alone) starts each piece in a thread
of its own once it knows the test that joins it is to run (`Pieces.start`), and stops what is left when the run
ends (`Pieces.stop`). A piece writes what came of it into a directory of its own, which the joining test reads
in whichever worker runs it (`Outcome`): `status` when its main process has exited (its exit status), `error`
when it could not start (the traceback), and what else the piece keeps there (its output, where its service is).
Each piece that needs a service runs one of its own (own Redis, own workers): it takes no worker of a session's.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.cluster.network import available
from tests.support.servers import ROOT, free_port, redis_server, running_service, wait_for
from tests.support.site import Site

DEBIAN_PYTHON = "/usr/bin/python3"


def keep(directory: Path, name: str, text: str) -> None:
    """`text` as the file `name` of `directory`, whole when it appears (a reader polls for it)."""
    part = directory / f".{name}.part"
    part.write_text(text)
    os.replace(part, directory / name)


def finish(process: subprocess.Popen[bytes], directory: Path, stopping: threading.Event,
           ending: Callable[[subprocess.Popen[bytes]], None] = subprocess.Popen.kill) -> None:
    """Wait for `process` and keep its exit status; end it (`ending`) if the run ends first."""
    while process.poll() is None:
        if stopping.wait(0.5):
            ending(process)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            return
    keep(directory, "status", str(process.returncode))


def terminate(process: subprocess.Popen[bytes]) -> None:
    process.terminate()


class Outcome:
    """What a piece kept in its directory, read by the test that joins it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def status(self, timeout: float) -> int:
        """The piece's exit status, once it has one (within `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        while not (self.directory / "status").exists():
            if (self.directory / "error").exists():
                raise RuntimeError(f"{self.directory.name} did not start: {self.read('error')}")
            if not self.directory.exists():
                raise RuntimeError(f"{self.directory} is missing: the run did not start {self.directory.name} "
                                   "(tests/support/background.py)")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.directory.name} did not end within {timeout} s")
            time.sleep(0.5)
        return int(self.read("status"))

    def read(self, name: str) -> str:
        path = self.directory / name
        return path.read_text(errors="replace") if path.exists() else ""


# --- the pieces -------------------------------------------------------------------------------------

LOCK_TEST = "test_the_lock_resolves_under_debian_s_python"


def resolve_lock(directory: Path, stopping: threading.Event) -> None:
    """Debian's python3 makes a venv and pip resolves the lock and the project's dependencies (--dry-run): kept
    `errors` (its first line the Python's version) and `status`."""
    if not os.path.exists(DEBIAN_PYTHON):
        keep(directory, "errors", f"{DEBIAN_PYTHON} is missing")
        keep(directory, "status", "1")
        return
    venv = directory / "venv"
    script = (f'{DEBIAN_PYTHON} -c "import sys; print(sys.version_info[:3])" >&2 && {DEBIAN_PYTHON} -m venv {venv} '
              f'&& {venv}/bin/pip install --dry-run --quiet --no-input -c requirements.lock -e ".[dev]"')
    with (directory / "errors").open("wb") as errors:
        process = subprocess.Popen(["bash", "-c", script], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=errors)
    finish(process, directory, stopping)


CONTRACT_TEST = "test_schemathesis_finds_no_contract_failure"
CONTRACT_EXAMPLES = 3  # per operation in fuzzing (coverage makes its own: about 14,000 cases in all)
CONTRACT_SEED = 51  # a failure repeats with the same draws
CONTRACT_WORKERS = 2  # schemathesis's concurrent clients
# Per request, and the answer's time its `max_response_time` check (part of "all") allows: the CLI's default is
# 10 s for both, but the coverage phase ignores the short values the configuration gives and sends the schema's
# defaults too, a 5 s recording among them, which on a loaded machine takes over 10 s. So the check says "no hang",
# not how fast (the bench judges speed).
CONTRACT_REQUEST_TIMEOUT = 60


def run_contract(directory: Path, stopping: threading.Event) -> None:
    """tests/support/contract_run.py in a network namespace of its own: kept `output.txt` (the CLI's),
    `processes.log` (its services') and `status`; or `unavailable` (why there is no namespace) and status 0."""
    why = available()
    if why:
        keep(directory, "unavailable", why)
        keep(directory, "status", "0")
        return
    with (directory / "processes.log").open("wb") as log:  # a file, not a pipe nobody reads while it runs
        process = subprocess.Popen(
            ["unshare", "--net", sys.executable, "-m", "tests.support.contract_run", str(directory),
             "--max-examples", str(CONTRACT_EXAMPLES), "--seed", str(CONTRACT_SEED), "--workers",
             str(CONTRACT_WORKERS), "--request-timeout", str(CONTRACT_REQUEST_TIMEOUT), "--max-response-time",
             str(CONTRACT_REQUEST_TIMEOUT)],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    finish(process, directory, stopping, terminate)  # terminated, it stops its services


TYPESCRIPT_TEST = "test_a_standard_typescript_client_completes_a_65_s_capture_and_cancels_a_queued_one"
TS_CLIENT = ROOT / "tests" / "sdk" / "mcp_client.mjs"
LATE_SECONDS = 65  # past the TypeScript SDK's default request timeout (60 s)
# A page that shows what the capture waits for only after LATE_SECONDS: green, with #ready.
LATE_PAGE = ("<style>html, body { margin: 0; height: 100%; background: rgb(255, 255, 255); }</style><script>"
             f"setTimeout(() => {{ document.body.style.background = 'rgb(0, 255, 0)';"
             f" document.body.innerHTML = '<div id=ready>ready</div>'; }}, {LATE_SECONDS * 1000});</script>")
SMALL = {"viewport_width": 200, "viewport_height": 100}
TS_WORKERS = 2  # one long capture per transport keeps both busy: a third job waits in the queue


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SCREENSHOT_")}


def run_typescript_mcp(directory: Path, stopping: threading.Event) -> None:
    """The official TypeScript MCP client's scenario (tests/sdk/mcp_client.mjs) over stdio and streamable HTTP
    at once, on a service of its own with TS_WORKERS workers: kept `service.json` (its URL, the key, the number of
    transports), `client.out`, `client.err` and `status`; the service runs on until the run ends (the test reads
    its usage)."""
    from tests.conftest import create_org  # tests/conftest.py imports this module

    (directory / "redis").mkdir()
    with (Site() as site, redis_server(directory / "redis") as redis_url,
          running_service(redis_url, directory, workers=TS_WORKERS) as service):
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
            keep(directory, "service.json", json.dumps({"url": service.url, "key": org.access_key, "sides": 2}))
            with (directory / "client.out").open("wb") as out, (directory / "client.err").open("wb") as err:
                node = subprocess.Popen(["node", str(TS_CLIENT), json.dumps(plan)], cwd=ROOT, env=environment(),
                                        stdout=out, stderr=err)  # files: nobody reads a pipe while it runs
            finish(node, directory, stopping)
            stopping.wait()
        finally:
            mcp_http.terminate()
            mcp_http.wait(10)


ARCHIVE_TOOLS_TEST = "test_py_wacz_validates_it"


def make_archive_tools(directory: Path, stopping: threading.Event) -> None:
    """The virtualenvs of the web-archiving field's tools (tests/support/archive_tools.py, replay_tools.py), made
    with the run: pip's minute overlaps other tests instead of stalling the first that checks a WACZ. Each maker
    holds its file lock, so a test that needs the tools sooner waits for them there."""
    from tests.support.archive_tools import archive_tools
    from tests.support.replay_tools import replay_tools

    archive_tools()
    replay_tools()
    keep(directory, "status", "0")


@dataclass(frozen=True)
class Piece:
    name: str  # its directory's
    test: str  # the name of the test that joins it
    run: Callable[[Path, threading.Event], None]


PIECES = (Piece("contract", CONTRACT_TEST, run_contract), Piece("typescript-mcp", TYPESCRIPT_TEST, run_typescript_mcp),
          Piece("lock", LOCK_TEST, resolve_lock), Piece("archive-tools", ARCHIVE_TOOLS_TEST, make_archive_tools))


def outcome(base: Path, test: str) -> Outcome:
    """Where the piece that `test` joins keeps what came of it."""
    return Outcome(base / next(piece.name for piece in PIECES if piece.test == test))


class Pieces:
    """The pieces of one run, kept under `base`."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.started: set[str] = set()

    def start(self, nodeids: Iterable[str]) -> None:
        """Start each piece whose test is among `nodeids` (once)."""
        names = {nodeid.rsplit("::", 1)[-1].split("[", 1)[0] for nodeid in nodeids}
        for piece in PIECES:
            if piece.test in names and piece.name not in self.started:
                self.started.add(piece.name)
                directory = self.base / piece.name
                directory.mkdir(parents=True)
                thread = threading.Thread(target=self._run, args=(piece, directory), name=piece.name, daemon=True)
                thread.start()
                self.threads.append(thread)

    def _run(self, piece: Piece, directory: Path) -> None:
        try:
            piece.run(directory, self.stopping)
        except BaseException:  # noqa: BLE001 - the joining test reports it
            keep(directory, "error", traceback.format_exc())

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(90)
