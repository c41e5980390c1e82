"""Extra certificate authorities for Chromium (setting SCREENSHOT_CA_CERTIFICATES).

Chromium on Linux trusts, besides its own root store, the authorities in the user's NSS database
(`$HOME/.pki/nssdb`). When authorities are configured, Chromium gets a home directory of its own whose
database holds them, so internal sites signed by a private CA can be captured without turning
certificate checks off. Filling the database takes `certutil` (Debian package libnss3-tools).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from render.contract.errors import InternalError

_PEM_BLOCK = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)


class TrustStoreError(InternalError):
    """The configured authorities could not be given to Chromium (a deployment problem)."""


def certificates(pem_file: Path) -> list[str]:
    """The PEM certificates in a file; refuses a file without any."""
    try:
        blocks = _PEM_BLOCK.findall(pem_file.read_text())
    except OSError as error:
        raise TrustStoreError(f"SCREENSHOT_CA_CERTIFICATES: cannot read {pem_file}: {error.strerror}.") from None
    if not blocks:
        raise TrustStoreError(f"SCREENSHOT_CA_CERTIFICATES: {pem_file} holds no PEM certificate "
                              "(-----BEGIN CERTIFICATE-----).")
    return blocks


def chromium_home(pem_file: Path, home: Path) -> Path:
    """Make `home` a home directory whose NSS database trusts the authorities in `pem_file`."""
    blocks = certificates(pem_file)
    certutil = shutil.which("certutil")
    if certutil is None:
        raise TrustStoreError("SCREENSHOT_CA_CERTIFICATES needs certutil: install the Debian package "
                              "libnss3-tools (deploy/install-system-packages.sh does).")
    database = home / ".pki" / "nssdb"
    database.mkdir(parents=True, exist_ok=True)
    _certutil(certutil, "-N", "-d", f"sql:{database}", "--empty-password")
    for index, block in enumerate(blocks):
        pem = database / f"authority-{index}.pem"
        pem.write_text(block + "\n")
        _certutil(certutil, "-A", "-d", f"sql:{database}", "-n", f"screenshot-service {index}", "-t", "C,,",
                  "-i", str(pem))
    return home


def _certutil(certutil: str, *args: str) -> None:
    done = subprocess.run([certutil, *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise TrustStoreError(f"SCREENSHOT_CA_CERTIFICATES: certutil {args[0]} failed: "
                              f"{done.stderr.strip() or done.stdout.strip()}")
