"""Every setting is checked at start-up: a bad value is one line naming the variable, its value (unless it
is a secret) and what is expected, and the command exits with status 2 before starting anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from render.settings import RenderSettings
from tests.conftest import ROOT

CASES = [
    ("SCREENSHOT_ALLOWED_NETWORKS", "300.1.1.1/99", "neither a network"),
    ("SCREENSHOT_ALLOWED_NETWORKS", "10.0.0.0/8, 10.1.2.3.4", "neither a network"),
    ("SCREENSHOT_PROXY_DE", "notaurl", "SCREENSHOT_PROXY_DE: 'notaurl' is not an http proxy URL"),
    ("SCREENSHOT_RESOLVE_OVERRIDES", "garbage", "is not host=ip"),
    ("SCREENSHOT_RESOLVE_OVERRIDES", "a.test=10.0.0.300", "is not an IP address"),
    ("SCREENSHOT_REDIS_URL", "http://x", "expected redis://"),
    ("SCREENSHOT_PORT", "80000", "less than or equal to 65535"),
    ("SCREENSHOT_REGIONS", "Europe West", "is not a region label"),
    ("SCREENSHOT_MAX_QUEUE", "many", "valid integer"),
    ("SCREENSHOT_STORAGE_BACKEND", "s3", "needs SCREENSHOT_S3_BUCKET"),
]


def start(variable: str, value: str) -> subprocess.CompletedProcess[str]:
    env = {name: v for name, v in os.environ.items() if not name.startswith("SCREENSHOT_")}
    env.update({variable: value, "PYTHONPATH": str(ROOT)})
    return subprocess.run([sys.executable, "-m", "service.cli", "api"], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.mark.parametrize("variable, value, expected", CASES)
def test_a_bad_setting_is_one_line_and_exit_status_2(variable: str, value: str, expected: str) -> None:
    done = start(variable, value)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {variable}"), done.stderr
    assert expected in lines[0] and "Traceback" not in done.stderr


def test_a_secret_setting_is_named_but_not_shown() -> None:
    done = start("SCREENSHOT_PROXY_DE", "ftp://user:hunter2@proxy.example:21")
    assert done.returncode == 2 and "SCREENSHOT_PROXY_DE" in done.stderr and "hunter2" not in done.stderr


def test_a_key_file_of_the_wrong_kind_stops_start_up(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from render.contract.certificates import new_private_key_pem

    good = tmp_path / "certify.pem"
    good.write_bytes(new_private_key_pem())
    assert RenderSettings(certify_key_file=str(good)).certify_key_file == str(good)
    other = tmp_path / "ec.pem"
    other.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    for path, fragment in ((other, "must be an Ed25519 key"), (tmp_path / "missing.pem", "cannot read")):
        with pytest.raises(ValueError, match=fragment):
            RenderSettings(certify_key_file=str(path))
    # The archive's key: ECDSA P-384 only (P-256 is what ReplayWeb.page would not verify as ours).
    archive = tmp_path / "archive.pem"
    archive.write_bytes(ec.generate_private_key(ec.SECP384R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    assert RenderSettings(archive_key_file=str(archive)).archive_key_file == str(archive)
    for path, fragment in ((other, "must be an ECDSA P-384 key"), (good, "must be an ECDSA P-384 key"),
                           (tmp_path / "missing.pem", "cannot read")):
        with pytest.raises(ValueError, match=fragment):
            RenderSettings(archive_key_file=str(path))


@pytest.mark.parametrize(("variable", "value", "expected"), [
    ("SCREENSHOT_MCP_ALLOWED_HOSTS", "127.0.0.1", "write 127.0.0.1:8765 (this server's port) or 127.0.0.1:*"),
    ("SCREENSHOT_MCP_ALLOWED_HOSTS", "agents.internal:8765, [::1]", "write [::1]:8765"),
    ("SCREENSHOT_MCP_ALLOWED_ORIGINS", "agents.internal", "write http://agents.internal or https://"),
])
def test_mcp_hosts_and_origins_that_could_only_refuse_stop_start_up(variable: str, value: str,
                                                                   expected: str) -> None:
    """`--allowed-hosts 127.0.0.1`, as one would type it, made every request 421 with nothing said: a Host header
    names its port. It is refused at start, saying what to write."""
    env = {name: v for name, v in os.environ.items() if not name.startswith("SCREENSHOT_")}
    env.update({variable: value, "PYTHONPATH": str(ROOT)})
    done = subprocess.run([sys.executable, "-m", "service.cli", "mcp", "--transport", "http", "--port", "8765",
                           "--api", "http://127.0.0.1:9"], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and variable in lines[0] and expected in lines[0], done.stderr
