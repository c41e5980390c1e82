"""A replay tool nobody here wrote, to show a WACZ of this service again with its site gone: pywb (Webrecorder's
wayback machine) in proxy mode, pinned, in a virtualenv of its own under var/ made on first use.

pywb is GPL-3.0 and pins redis 2.10.6, older than the service's: it runs as a separate process at test time and is
never part of the product. In proxy mode with content rewriting off (`id_`), it answers a browser's requests with
the archived answers as they were, so a browser pointed at it draws the page from the archive alone; HTTPS goes
through pywb's own CA, which the browser is told to accept.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.support.archive_tools import pinned_venv
from tests.support.servers import ROOT

PINNED = ("pywb==2.10.0",)
VENV = ROOT / "var" / "replay-tools"
COLLECTION = "archived"


def replay_tools() -> Path:
    """pywb's bin directory (its virtualenv made if missing)."""
    return pinned_venv(VENV, PINNED)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def pywb_proxy(wacz: Path, directory: Path) -> Iterator[str]:
    """pywb serving `wacz` as an HTTP(S) proxy on loopback: its address (`http://127.0.0.1:port`)."""
    tools = replay_tools()
    # wb-manager reads a WACZ's WARCs and its `indexes/*.cdx` only when unpacking it into the collection.
    for step in (["init", COLLECTION], ["add", "--unpack-wacz", COLLECTION, str(wacz)]):
        done = subprocess.run([str(tools / "wb-manager"), *step], cwd=directory, capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    (directory / "config.yaml").write_text(
        f"proxy:\n  coll: {COLLECTION}\n  enable_content_rewrite: false\n"
        "  ca_name: replay test CA\n  ca_file_cache: ./proxy-certs/replay-ca.pem\n"
        "framed_replay: false\nenable_memento: false\n")
    port = _free_port()
    log = (directory / "wayback.log").open("wb")
    process = subprocess.Popen([str(tools / "wayback"), "-b", "127.0.0.1", "-p", str(port)], cwd=directory,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (directory / "wayback.log").read_text()
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
                break
            assert time.monotonic() < deadline, "pywb did not answer within 60 s"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)
        if process.poll() is None:
            process.kill()
        log.close()
