"""The lock installs on stock Debian 12: resolved with Debian's own `/usr/bin/python3` (3.11.2, the
container image's interpreter), not only with whatever newer 3.11 a developer's machine has. A pin that needs a
later Python (soupsieve 4.1.1 needs 3.11.5) made `pip install -c requirements.lock` impossible there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.background import Outcome

DEBIAN_PYTHON = Path("/usr/bin/python3")


@pytest.mark.timeout(600)
def test_the_lock_resolves_under_debian_s_python(lock_resolution: Outcome) -> None:
    """Started with the run (tests/support/background.py: Debian's python3 makes a venv and pip resolves the lock
    and the project's dependencies, --dry-run); joined here."""
    assert DEBIAN_PYTHON.exists(), "Debian's python3 is missing: `make system` installs python3-venv (and python3)"
    status = lock_resolution.status(timeout=540)
    errors = lock_resolution.read("errors")
    version = errors.splitlines()[0] if errors else "?"
    assert status == 0, f"Python {version}: {errors[-3000:]}"
