"""The web-archiving field's own tools, to check the WACZ files this service makes against: py-wacz (`wacz
validate`), warcio (`warcio check`) and cdxj-indexer, pinned, in a virtualenv of their own under var/ made on first
use. cdxj-indexer needs `surt`, which is AGPL-licensed: they run as separate processes at test time and are never
part of the product."""

from __future__ import annotations

import fcntl
import gzip
import io
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support.servers import ROOT

PINNED = ("wacz==0.6.0", "warcio==1.8.1", "cdxj-indexer==1.5.0", "setuptools<81")  # pkg_resources: py-wacz's
VENV = ROOT / "var" / "archive-tools"


def pinned_venv(venv: Path, pinned: tuple[str, ...]) -> Path:
    """`venv`'s bin directory, the virtualenv made with exactly `pinned` (once, under a lock beside it: xdist's
    workers and the run's background share it) when it is missing or was made with other pins."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    stamp = venv / "pinned.txt"
    with (venv.parent / f"{venv.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text() != "\n".join(pinned):
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
                            *pinned], check=True)
            stamp.write_text("\n".join(pinned))
    return venv / "bin"


def archive_tools() -> Path:
    """The tools' bin directory (their virtualenv made if missing)."""
    return pinned_venv(VENV, PINNED)


def run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(archive_tools() / tool), *args], capture_output=True, text=True, timeout=300,
                          check=False)


def every_byte(data: bytes) -> bytes:
    """A WACZ's files with the WARC's records ungzipped: where a secret, or another job's traffic, could be."""
    archive = zipfile.ZipFile(io.BytesIO(data))
    return b"".join(gzip.decompress(archive.read(name)) if name.endswith(".gz") else archive.read(name)
                    for name in archive.namelist())


def archive_problems(data: bytes, public_key: str | None = None) -> list[str]:
    """What is wrong with a WACZ of this service, by the field's own tools as well as ours: every file's hash and
    the signature (render.contract.archives, `public_key` when given), py-wacz's `wacz validate` and `warcio check`
    of its WARC. Empty when all hold."""
    import tempfile

    from render.contract.archives import verify

    problems = verify(data, public_key)
    with tempfile.TemporaryDirectory(prefix="wacz-") as directory:
        made = Path(directory) / "capture.wacz"
        made.write_bytes(data)
        validated = run("wacz", "validate", "-f", str(made))
        if validated.returncode != 0 or "Validation succeeded" not in validated.stdout:
            problems.append(f"wacz validate: {validated.stdout[-500:]}{validated.stderr[-500:]}")
        warc = Path(directory) / "data.warc.gz"
        warc.write_bytes(zipfile.ZipFile(io.BytesIO(data)).read("archive/data.warc.gz"))
        checked = run("warcio", "check", "-v", str(warc))
        if checked.returncode != 0 or "digest fail" in checked.stdout:
            problems.append(f"warcio check: {checked.stdout[-500:]}{checked.stderr[-500:]}")
    return problems
