"""The lock installs on stock Debian 12 (issue 47): resolved with Debian's own `/usr/bin/python3` (3.11.2, the
container image's interpreter), not only with whatever newer 3.11 a developer's machine has. A pin that needs a
later Python (soupsieve 4.1.1 needs 3.11.5) made `pip install -c requirements.lock` impossible there."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEBIAN_PYTHON = Path("/usr/bin/python3")


@pytest.mark.timeout(600)
def test_the_lock_resolves_under_debian_s_python(tmp_path: Path) -> None:
    assert DEBIAN_PYTHON.exists(), "Debian's python3 is missing: `make system` installs python3-venv (and python3)"
    version = subprocess.run([str(DEBIAN_PYTHON), "-c", "import sys; print(sys.version_info[:3])"],
                             capture_output=True, text=True, check=True).stdout
    venv = tmp_path / "venv"
    subprocess.run([str(DEBIAN_PYTHON), "-m", "venv", str(venv)], check=True)
    resolved = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--dry-run", "--quiet", "--no-input", "-c", "requirements.lock",
         "-e", ".[dev]"], cwd=ROOT, capture_output=True, text=True)
    assert resolved.returncode == 0, f"Python {version.strip()}: {resolved.stderr[-3000:]}"
