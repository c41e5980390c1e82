"""The `screenshot-service` command as a user types it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import urllib.parse
from pathlib import Path

import httpx
import pytest
import pyvips

from tests.e2e.instance import cli, cli_env, command_line, group_alive, processes_with, start_run
from tests.support.servers import ROOT, free_port, process_tree, redis_server, wait_for
from tests.support.site import Site

pytestmark = pytest.mark.browser


def test_keys_create_list_revoke_without_a_running_service(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "data")
    created = cli("keys", "create", "--name", "acme", "--quota", "500", "--concurrency", "3", env=env).stdout
    access_key = re.search(r"access key:\s+(\S+)", created).group(1)  # type: ignore[union-attr]
    org_id = re.search(r"organisation:\s+(\S+)", created).group(1)  # type: ignore[union-attr]
    signing_key = re.search(r"signing key:\s+(\S{20,})", created).group(1)  # type: ignore[union-attr]
    # `keys show` prints the signing key again, by access key or by organisation id.
    for handle in (access_key, org_id):
        shown = cli("keys", "show", handle, env=env).stdout
        assert f"signing key:  {signing_key}" in shown and org_id in shown
    listing = cli("keys", "list", env=env).stdout
    assert re.search(rf"{org_id}\s+acme\s+{access_key[:4]}\.\.\.\s+500\s+3\s+optional\s+active", listing)
    assert access_key not in listing  # only a hint of the key is shown
    assert "revoked organisation" in cli("keys", "revoke", access_key, env=env).stdout
    assert re.search(rf"{org_id}.*revoked", cli("keys", "list", env=env).stdout)
    missing = cli("keys", "revoke", "no-such-key", env=env, check=False)
    assert missing.returncode == 1 and "no organisation" in missing.stderr
    assert not (tmp_path / "data" / "redis" / "redis.sock").exists()  # the embedded Redis was stopped again


def test_take_writes_the_file_in_the_format_of_its_extension(tmp_path: Path, site: Site) -> None:
    output = tmp_path / "shot.webp"
    result = cli("take", site.url("/colours.html"), "-o", str(output), "--viewport-width", "320",
                 "--viewport-height", "200", env=cli_env(tmp_path))
    assert "Saved" in result.stderr and "320x200 webp" in result.stderr
    image = pyvips.Image.new_from_file(str(output))
    assert image.get("vips-loader") == "webpload"
    assert (image.width, image.height) == (320, 200)
    red = image.getpoint(160, 20)[:3]
    assert red[0] > 240 and red[1] < 15 and red[2] < 15, red  # webp is lossy


def test_take_reports_bad_parameters_by_name(tmp_path: Path) -> None:
    result = cli("take", "https://example.com", "-o", str(tmp_path / "x.png"), "--viewport-width", "abc",
                 env=cli_env(tmp_path), check=False)
    assert result.returncode == 1
    assert "request_not_valid" in result.stderr and "viewport_width" in result.stderr


def test_take_renders_a_markdown_file(tmp_path: Path) -> None:
    source = tmp_path / "notes.md"
    source.write_text("# Notes\n\n- one\n- two\n")
    output = tmp_path / "notes.pdf"
    cli("take", str(source), "-o", str(output), env=cli_env(tmp_path))
    assert output.read_bytes().startswith(b"%PDF-")


def test_take_help_lists_every_parameter_and_booleans_stand_alone(tmp_path: Path) -> None:
    from render.contract.options import TakeOptions

    shown = cli("take", "--help", env=cli_env(tmp_path)).stdout
    flags = set(re.findall(r"^\s+(--[a-z0-9-]+)", shown, re.M))
    expected = {"--" + (info.alias or name).replace("_", "-") for name, info in TakeOptions.model_fields.items()
                if name not in ("url", "html", "markdown")}
    assert expected <= flags, sorted(expected - flags)
    assert "Capture the whole scrollable page." in shown and "Default: 1280." in shown
    page = tmp_path / "tall.html"
    page.write_text("<body style='margin:0'><div style='height:1500px;background:#00f'></div></body>")
    output = tmp_path / "tall.png"
    result = cli("take", str(page), "-o", str(output), "--full-page", "--viewport-width", "300",
                 "--viewport-height", "200", "--hide-selectors", "nav", "--hide-selectors", "footer",
                 env=cli_env(tmp_path))
    assert "300x1500 png" in result.stderr
    unknown = cli("take", str(page), "-o", str(output), "--full-pag", env=cli_env(tmp_path), check=False)
    assert unknown.returncode == 2 and "unrecognized arguments: --full-pag" in unknown.stderr


def test_take_says_what_is_missing_before_capturing(tmp_path: Path) -> None:
    missing = cli("take", str(tmp_path / "notes.md"), "-o", str(tmp_path / "notes.png"), env=cli_env(tmp_path),
                  check=False)
    assert missing.returncode == 2 and f"no such file: {tmp_path / 'notes.md'}" in missing.stderr
    assert "url" not in missing.stderr.split("(")[0]
    page = tmp_path / "page.html"
    page.write_text("<h1>hello</h1>")
    nowhere = cli("take", str(page), "-o", str(tmp_path / "missing" / "page.png"), env=cli_env(tmp_path),
                  check=False)
    assert nowhere.returncode == 2 and "Traceback" not in nowhere.stderr
    assert f"the folder of --output does not exist: {tmp_path / 'missing'}" in nowhere.stderr
    assert "Capturing" not in nowhere.stderr  # refused before rendering anything


@pytest.mark.parametrize("command", [("run",), ("api",), ("worker",), ("webhooks",), ("keys",), ("keys", "list"),
                                     ("keys", "create"), ("take",), ("sign",), ("healthcheck",)])
def test_every_command_says_what_it_does(tmp_path: Path, command: tuple[str, ...]) -> None:
    shown = cli(*command, "--help", env=cli_env(tmp_path)).stdout
    description = shown.split("\n\n")[1]  # argparse: usage, blank line, the description
    assert not description.lstrip().startswith(("positional arguments", "options")), shown
    assert len(description.split()) >= 4, shown


def test_the_help_names_every_command_and_sign_shows_its_parameters(tmp_path: Path) -> None:
    shown = cli("--help", env=cli_env(tmp_path)).stdout
    usage, description = shown.split("\n\n")[:2]
    commands = re.search(r"\{([a-z,]+)\}", usage).group(1).split(",")  # type: ignore[union-attr]
    assert {"run", "api", "worker", "webhooks", "healthcheck", "keys", "take", "sign"} <= set(commands)
    named = set(re.findall(r"[a-z]+", description))
    assert [command for command in commands if command not in named] == []
    sign_usage = cli("sign", "--help", env=cli_env(tmp_path)).stdout.split("\n\n")[0]
    assert "[name=value ...]" in sign_usage


def test_keys_create_refuses_negative_limits(tmp_path: Path) -> None:
    for flag, value, problem in (("--quota", "-5", "-5 is less than 0"), ("--concurrency", "0", "0 is less than 1"),
                                 ("--quota", "many", "'many' is not a whole number")):
        refused = cli("keys", "create", flag, value, env=cli_env(tmp_path / "data"), check=False)
        assert refused.returncode == 2 and problem in refused.stderr, refused.stderr
    assert not (tmp_path / "data").exists()  # refused before Redis was started


def test_sign_refuses_what_the_endpoint_would_refuse(tmp_path: Path) -> None:
    keys = ("sign", "--key", "k", "--signing-key", "s")
    signed = cli(*keys, "url=https://example.com", "full_page=true", env=cli_env(tmp_path))
    assert "&signature=" in signed.stdout
    for params, problem in ((["url=https://example.com", "fullpage=true"], "error: fullpage:"),
                            (["url=https://example.com", "viewport_width=wide"], "error: viewport_width:"),
                            (["url=https://example.com", "scenario=scroll"], "error: scenario:")):
        refused = cli(*keys, *params, env=cli_env(tmp_path), check=False)
        assert refused.returncode == 2 and problem in refused.stderr and refused.stdout == "", refused.stderr
    animated = cli(*keys, "--endpoint", "animate", "url=https://example.com", "scenario=scroll",
                   env=cli_env(tmp_path))
    assert "/v1/screenshot/animate?" in animated.stdout


def test_run_restarts_what_dies_its_process_group_ended_first_redis_included(tmp_path: Path, site: Site) -> None:
    process, banner, data_dir, port, env = start_run(tmp_path)
    try:
        key = re.search(r"access key:\s+(\S+)", banner).group(1)  # type: ignore[union-attr]
        take = {"access_key": key, "url": site.url("/colours.html"), "viewport_width": "100", "viewport_height": "50"}
        base = f"http://127.0.0.1:{port}/v1/screenshot"

        def role(name: str) -> list[int]:
            return [pid for pid in processes_with(str(data_dir)) if f"service.cli {name}" in command_line(pid)]

        # The deliverer forks RQ's scheduler into its process group; killed alone, the deliverer would leave it
        # running under PID 1, holding the scheduler's lock.
        wait_for(lambda: len(role("webhooks")) >= 2, 60, "the deliverer and its scheduler")
        deliverer = min(role("webhooks"))
        assert os.getpgid(deliverer) == deliverer
        os.kill(deliverer, signal.SIGKILL)
        wait_for(lambda: not group_alive(deliverer), 30, "the dead deliverer's whole group ended")
        wait_for(lambda: len([pid for pid in role("webhooks") if pid != deliverer]) >= 2, 60,
                 "a new deliverer with its own scheduler")
        # The private Redis killed: started again on its data (AOF), and captures work again by themselves.
        def redis_servers() -> list[int]:  # redis-server writes its title over its environment: found by parent
            return [pid for pid in process_tree(process.pid)[1:] if "redis-server" in command_line(pid)]

        redis_pid, = redis_servers()
        os.kill(redis_pid, signal.SIGKILL)
        wait_for(lambda: [pid for pid in redis_servers() if pid != redis_pid], 30, "a new redis-server")
        wait_for(lambda: httpx.get(f"{base}/take", params=take, timeout=60).status_code == 200, 90,
                 "a capture after Redis came back")
        assert httpx.get(f"{base}/usage", params={"access_key": key}).json()["used"] >= 1  # the key survived
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=90)
    assert "webhooks exited with -9; restarting it" in output and "redis-server exited with -9" in output, output
    assert processes_with(str(data_dir)) == []


def test_run_starts_everything_prints_a_working_curl_and_stops_cleanly(tmp_path: Path, site: Site) -> None:
    process, banner, data_dir, port, env = start_run(tmp_path)
    try:
        assert f"running at http://127.0.0.1:{port}" in banner
        key = re.search(r"access key:\s+(\S+)", banner).group(1)  # type: ignore[union-attr]
        signing_key = re.search(r"signing key:\s+(\S+)", banner).group(1)  # type: ignore[union-attr]
        curl = re.search(r"try:\s+(curl .*)", banner).group(1)  # type: ignore[union-attr]
        # The printed command works as printed, pointed at a page this machine can reach.
        curl = curl.replace("https://example.com", site.url("/colours.html")).replace(
            "example.png", str(tmp_path / "example.png"))
        subprocess.run(shlex.split(curl) + ["-sf"], check=True, timeout=60)
        image = pyvips.Image.new_from_file(str(tmp_path / "example.png"))
        assert (image.width, image.height) == (1280, 1024)
        # The key is kept in the data dir and reused by the next start.
        assert (data_dir / "access_key").read_text().strip() == key
        usage = httpx.get(f"http://127.0.0.1:{port}/v1/screenshot/usage", params={"access_key": key}).json()
        assert usage["used"] == 1
        # The printed signing key signs requests the way the official SDKs do (their query string as sent).
        query = urllib.parse.urlencode({"url": site.url("/colours.html"), "format": "jpeg", "access_key": key})
        for secret, status in ((signing_key, 200), (signing_key + "x", 400)):
            signature = hmac.new(secret.encode(), query.encode(), hashlib.sha256).hexdigest()
            signed = httpx.get(f"http://127.0.0.1:{port}/v1/screenshot/take?{query}&signature={signature}",
                               timeout=60)
            assert signed.status_code == status, signed.text
        assert signed.json()["error_code"] == "signature_is_not_valid"
        assert len(processes_with(str(data_dir))) >= 3  # API, worker, Chromium at least
        # The image's HEALTHCHECK, run beside `run`: every role it runs is healthy (the deliverer's Redis
        # is the private one in the data dir).
        for role in ("run", "api", "worker", "webhooks"):
            health = cli("healthcheck", "--role", role, env=env, check=False)
            assert health.returncode == 0, (role, health.stderr)
    finally:
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=90)
    assert process.returncode == 0, output
    assert "Stopped." in output
    leftovers = processes_with(str(data_dir))
    assert leftovers == [], leftovers
    assert (data_dir / "redis" / "appendonlydir").is_dir()  # Redis kept its data with AOF


def test_take_saves_what_the_page_told_beside_the_output(tmp_path: Path, site: Site) -> None:
    output = tmp_path / "shot.png"
    result = cli("take", site.url("/evidence/console.html"), "-o", str(output), "--har", "--metadata-console",
                 "--metadata-accessibility", env=cli_env(tmp_path))
    har = json.loads((tmp_path / "shot.har.har").read_text())
    assert har["log"]["entries"][0]["request"]["url"] == site.url("/evidence/console.html")
    assert (tmp_path / "shot.accessibility.yaml").read_text().startswith("- paragraph: console")
    assert f"Saved {tmp_path / 'shot.har.har'}" in result.stderr
    assert json.loads(result.stdout)["console"]["errors"] == 2
    refused = cli("take", site.url("/tall.html"), "-o", str(output), "--certify", env=cli_env(tmp_path), check=False)
    assert refused.returncode == 2 and "certify needs the service" in refused.stderr


def test_take_writes_a_signed_web_archive_of_the_page(tmp_path: Path, site: Site) -> None:
    """`take page.wacz`: the page as a WACZ signed with SCREENSHOT_ARCHIVE_KEY_FILE's key (no Redis to keep one in:
    without the file it says how to make one), which `verify` checks against that key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    output = tmp_path / "page.wacz"
    refused = cli("take", site.url("/evidence/traffic.html"), "-o", str(output), env=cli_env(tmp_path), check=False)
    assert refused.returncode == 2 and "SCREENSHOT_ARCHIVE_KEY_FILE" in refused.stderr and "openssl" in refused.stderr
    key = ec.generate_private_key(ec.SECP384R1())
    (tmp_path / "archive.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    env = {**cli_env(tmp_path), "SCREENSHOT_ARCHIVE_KEY_FILE": str(tmp_path / "archive.pem")}
    made = cli("take", site.url("/evidence/traffic.html"), "-o", str(output), "--viewport-width", "320", env=env)
    assert "wacz" in made.stderr and output.read_bytes().startswith(b"PK")
    public = base64.b64encode(key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).decode()
    checked = cli("verify", str(output), "--public-key", public, env=env)
    assert "Archive valid" in checked.stdout and "(the pinned key)" in checked.stdout


def test_the_api_stops_cleanly_on_sigterm_with_exit_code_0(tmp_path: Path) -> None:
    """An orchestrator reads the exit code: a graceful stop is 0 (uvicorn raised SIGTERM again after its own
    shutdown, so the API ended 143)."""
    (tmp_path / "redis").mkdir()
    with redis_server(tmp_path / "redis") as url:
        port = free_port()
        env = cli_env(tmp_path, SCREENSHOT_REDIS_URL=url, SCREENSHOT_PORT=str(port))
        api = subprocess.Popen([sys.executable, "-m", "service.cli", "api"], env=env, cwd=ROOT)
        try:
            wait_for(lambda: httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200, 60, "the API")
        finally:
            api.send_signal(signal.SIGTERM)
            api.wait(60)
    assert api.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="dropping capabilities needs root")
def test_run_on_a_data_dir_it_cannot_write_says_how_to_fix_it(tmp_path: Path) -> None:
    """A bind mount at /data owned by someone else, as an operator's first container run meets it: one line
    saying what to do, no traceback. (Root without its capabilities is refused as any other user is.)"""
    data_dir = tmp_path / "not-ours"
    data_dir.mkdir()
    os.chown(data_dir, 65534, 65534)
    os.chmod(data_dir, 0o755)
    env = cli_env(data_dir, SCREENSHOT_PORT="1")
    done = subprocess.run(["setpriv", "--inh-caps=-all", "--bounding-set=-all", sys.executable, "-m",
                           "service.cli", "run"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert f"SCREENSHOT_DATA_DIR {data_dir} is not writable by uid 0 (owned by uid 65534)" in done.stderr
    assert "chown" in done.stderr
