"""`screenshot-service verify`: a certificate of certify=true and the files of its capture, checked offline
(render.contract.certificates)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def cmd_verify(args: argparse.Namespace) -> int:
    """Check a certify=true certificate and the files said to be of it, or an archive=true WACZ, offline: 0 when
    the signature holds and every file is what it says byte for byte, 1 when not (saying what), 2 for unreadable
    input."""
    from render.contract.certificates import CertificateInvalid, check, parse_public_key

    try:
        head = Path(args.certificate).read_bytes()[:4]
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if head.startswith(b"PK"):
        return _verify_archive(args)

    try:
        certificate = json.loads(Path(args.certificate).read_bytes())
        files = {name: Path(name).read_bytes() for name in args.files}
        pinned = None
        if args.public_key:
            given = Path(args.public_key)
            pinned = parse_public_key(given.read_text() if given.is_file() else args.public_key)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        checked = check(certificate, files, pinned)
    except CertificateInvalid as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 1
    manifest = certificate["manifest"]
    print(f"Signature valid: key {checked.key_id}" + (" (the pinned key)" if checked.pinned else
          " (not pinned: pass --public-key with the key of GET /v1/screenshot/certify/public-key to require the "
          "service's)"))
    print(f"Capture {manifest['reference']} of {manifest.get('requested_url') or 'a document'} "
          f"(final {manifest.get('final_url')}, HTTP {manifest.get('http_status')}), "
          f"{manifest['started_at']} to {manifest['finished_at']}, Chromium {manifest.get('chromium')}")
    for name, artefact in checked.files:
        print(f"OK  {name}: the capture's {artefact}")
    return 0


def _verify_archive(args: argparse.Namespace) -> int:
    """An archive=true WACZ: every file's hash, the package's, and the signature (by --public-key when given)."""
    from render.contract.archives import CERTIFICATE_PATH, verify

    key = args.public_key
    if key and Path(key).is_file():
        key = Path(key).read_text().strip()
    data = Path(args.certificate).read_bytes()
    problems = verify(data, key or None)
    certified = _certificate_inside(data) if not problems else None
    if isinstance(certified, str):
        problems.append(certified)
    for problem in problems:
        print(f"FAILED: {problem}", file=sys.stderr)
    if problems:
        return 1
    print("Archive valid: every file is the one listed, and the signature holds" + (
        " (the pinned key)" if key else " (not pinned: pass --public-key with the key of "
                                        "GET /v1/screenshot/archive/public-key to require the service's)"))
    if certified is not None:
        print(f"Certificate inside ({CERTIFICATE_PATH}): signature valid, key {certified.key_id}; check it against "
              "GET /v1/screenshot/certify/public-key with `verify` on the certificate itself")
    return 0


def _certificate_inside(data: bytes) -> Any:
    """certify=true's certificate inside a WACZ, checked: what `check` found, a problem, or None without one."""
    import io
    import zipfile

    from render.contract.archives import CERTIFICATE_PATH
    from render.contract.certificates import CertificateInvalid, check

    package = zipfile.ZipFile(io.BytesIO(data))
    if CERTIFICATE_PATH not in package.namelist():
        return None
    try:
        return check(json.loads(package.read(CERTIFICATE_PATH)), {})
    except (CertificateInvalid, ValueError) as error:
        return f"{CERTIFICATE_PATH}: {error}"


def add_verify_command(commands: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    """The `verify` command, among `commands`."""
    verify = command(commands, "verify", "check a certify=true certificate and files of its capture, or an "
                     "archive=true WACZ, offline: verify CERTIFICATE [FILE ...] | verify ARCHIVE.wacz "
                     "[--public-key KEY]",
                     description="Check a certificate of certify=true offline: its Ed25519 signature over the "
                     "manifest, and that each FILE is one of the capture's artefacts byte for byte (by SHA-256); "
                     "or a WACZ of archive=true: every file's SHA-256 and its ECDSA P-384 signature. "
                     "Exits 0 when all holds, 1 naming what does not (a changed byte anywhere), 2 for input it "
                     "cannot read.")
    verify.add_argument("certificate", help="the certificate's JSON (certificate.url, x-service-certificate-url), "
                        "or the WACZ of archive=true (archive.url)")
    verify.add_argument("files", nargs="*", help="files returned by the capture: the output, its content, ...")
    verify.add_argument("--public-key", help="require this signer: base64 of the key, its PEM, or a file holding "
                        "either (GET /v1/screenshot/certify/public-key gives both; for a WACZ, base64 SPKI: GET "
                        "/v1/screenshot/archive/public-key)")
