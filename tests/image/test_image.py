"""The container image built and run as an operator runs it: Debian's Podman, Docker's image format, the
base made with mmdebstrap from Debian's packages (the registry of images is not reachable here) and tagged as the
Dockerfile's FROM, host networking only. `make image-test` runs this module after `make test`.

What the environment needs is passed in here, never baked into the image: the host's CA bundle for the build's
downloads (a TLS-inspecting proxy), and runc where crun cannot run (cgroups in hybrid mode).
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import httpx
import pytest
import pyvips

from tests.support.receivers import Receiver
from tests.support.servers import ROOT, S3_ENV, free_port, s3_server, wait_for
from tests.support.site import Site

pytestmark = pytest.mark.timeout(2400)
IMAGE = "localhost/screenshot-service:image-test"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
SECCOMP = ROOT / "deploy" / "seccomp-chromium.json"
KEY = "image-test-access-key-0123456789"
MIRROR = "http://deb.debian.org/debian"


def podman(*args: str, check: bool = True, timeout: float = 120, **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["podman", *RUNTIME, *args], capture_output=True, text=True, timeout=timeout,
                          **kwargs)  # type: ignore[call-overload]
    if check and done.returncode != 0:
        said = "\n".join(line for line in done.stderr.splitlines() if "level=error" not in line)
        raise AssertionError(f"podman {' '.join(args[:4])} ... exited {done.returncode}: {said[-2000:]}")
    return done


def _limits() -> list[str]:
    """Limits this machine lets a container set: Podman's defaults for open files (1,048,576) and processes
    may exceed them (runc: "error setting rlimit type 7: operation not permitted"). The host's own open-file
    limit, and 32,768 processes at most (what `podman build` gives its steps)."""
    found = []
    for name, limit, most in (("nofile", resource.RLIMIT_NOFILE, None), ("nproc", resource.RLIMIT_NPROC, 32768)):
        hard = resource.getrlimit(limit)[1]
        value = most if hard == resource.RLIM_INFINITY else min(hard, most or hard)
        if value is not None:
            found += ["--ulimit", f"{name}={value}:{value}"]
    return found


LIMITS = _limits()


def _runtime() -> list[str]:
    """crun refuses cgroups in hybrid mode (v1 controllers mounted, as on this machine): runc then."""
    hybrid = any(line.split()[2] == "cgroup" for line in Path("/proc/mounts").read_text().splitlines()
                 if len(line.split()) > 2)
    return ["--runtime", "runc"] if hybrid and shutil.which("runc") else []


RUNTIME = _runtime()


# What the registry's debian:*-slim images leave out (debuerreotype's slim list), so that the image built here weighs
# what an operator's does: documentation but the licences, manual pages, translations.
SLIM_EXCLUDES = ("path-exclude=/usr/share/doc/*", "path-include=/usr/share/doc/*/copyright",
                 "path-exclude=/usr/share/groff/*", "path-exclude=/usr/share/info/*",
                 "path-exclude=/usr/share/linda/*", "path-exclude=/usr/share/lintian/*",
                 "path-exclude=/usr/share/locale/*", "path-exclude=/usr/share/man/*")


def base_image() -> str:
    """The Dockerfile's FROM, made locally with mmdebstrap when it is not there yet: Debian 12's minbase as the
    registry's slim image is (merged /usr without usrmerge and the Perl it needs, SLIM_EXCLUDES), 82 MB."""
    wanted = re.search(r"^FROM\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.M)
    assert wanted is not None
    name = wanted.group(1)
    full = name if "/" in name else f"docker.io/library/{name}"
    if podman("image", "exists", full, check=False).returncode != 0:
        sys.stderr.write(f"\nimage-test: making {full} with mmdebstrap ...\n")
        tarball = Path(os.environ.get("TMPDIR", "/tmp")) / f"base-{uuid.uuid4().hex}.tar"
        try:
            subprocess.run(["mmdebstrap", "--variant=minbase", "--format=tar", "--include=ca-certificates",
                            "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
                            *(f"--dpkgopt={option}" for option in SLIM_EXCLUDES),
                            "bookworm", str(tarball), MIRROR], check=True, capture_output=True, timeout=900)
            with tarball.open("rb") as data:
                podman("import", "-", full, stdin=data)
        finally:
            tarball.unlink(missing_ok=True)
    return full


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The image built from the checkout, the host's CA bundle lent to the build stage only."""
    base_image()
    log = tmp_path_factory.mktemp("image") / "build.log"
    sys.stderr.write(f"\nimage-test: building {IMAGE} (several minutes the first time; log: {log}) ...\n")
    started = time.monotonic()
    with log.open("w") as out:
        built = subprocess.run(
            ["podman", *RUNTIME, "build", "--format", "docker", "--network=host", "-t", IMAGE,
             "--volume", f"{CA_BUNDLE}:/run/host-ca.crt:ro", "--build-arg", "PIP_CERT=/run/host-ca.crt",
             "--build-arg", "NODE_EXTRA_CA_CERTS=/run/host-ca.crt", str(ROOT)],
            stdout=out, stderr=subprocess.STDOUT, timeout=2400)
    assert built.returncode == 0, log.read_text()[-4000:]
    size = int(podman("image", "inspect", IMAGE, "--format", "{{.Size}}").stdout.strip())
    sys.stderr.write(f"image-test: built in {time.monotonic() - started:.0f} s, {size / 1e9:.2f} GB\n")
    return IMAGE


def test_the_final_image_carries_no_build_tools_and_runs_as_10001(image: str) -> None:
    inspected = json.loads(podman("image", "inspect", image).stdout)[0]
    assert inspected["Config"]["User"] == "10001:10001"
    assert inspected["Config"]["Entrypoint"][:2] == ["/usr/bin/tini", "--"]
    assert "PIP_CERT" not in json.dumps(inspected["Config"].get("Env", []))  # the build's CA stayed out
    found = podman("run", "--rm", "--network=none", *LIMITS, "--entrypoint", "/bin/sh", image, "-c",
                   "id -u; id -g; command -v node npm nodejs || true; test -d /opt/venv/bin && echo venv; "
                   "test -d /opt/screenshot-service/deploy/npm/node_modules/@duckduckgo/autoconsent && echo rules")
    lines = found.stdout.split()
    assert lines[:2] == ["10001", "10001"], found.stdout
    assert "venv" in lines and "rules" in lines
    assert not [line for line in lines if line.endswith(("/node", "/npm", "/nodejs"))], found.stdout
    # `run` starts as many workers as the container may use, not one per host core.
    counted = podman("run", "--rm", "--network=none", "--cpus", "1", *LIMITS, "--entrypoint",
                     "/opt/venv/bin/python", image, "-c",
                     "import os; from service.settings import default_workers as d; print(d(), os.cpu_count())")
    workers, host_cores = map(int, counted.stdout.split())
    assert workers == 1, (workers, host_cores)


# Run in the image: an object stored through the service's S3 backend (argv: endpoint, bucket), and a client of each
# service botocore's credential providers call (assumed roles, web identity, SSO, sign-in), made from its model.
STORE_IN_S3 = """
import sys, boto3
from storage.s3 import S3Storage
S3Storage(sys.argv[2], endpoint_url=sys.argv[1], region="us-east-1", path_style=True).put(
    "image-test.txt", b"stored from the image", "text/plain")
for service in ("sts", "sso", "sso-oidc", "signin"):
    boto3.client(service, region_name="us-east-1")
"""


def run_container(image: str, name: str, *args: str, env: dict[str, str], options: tuple[str, ...] = ()) -> None:
    environment = [item for key, value in env.items() for item in ("-e", f"{key}={value}")]
    podman("run", "-d", "--name", name, "--network=host", "--security-opt", f"seccomp={SECCOMP}", *LIMITS,
           "--stop-timeout", "120", *options, *environment, image, *args)


@pytest.fixture
def containers() -> Iterator[list[str]]:
    names: list[str] = []
    try:
        yield names
    finally:
        for name in reversed(names):
            if name.startswith("volume:"):
                podman("volume", "rm", "-f", name.removeprefix("volume:"), check=False, timeout=60)
            else:
                podman("rm", "-f", "-v", "-t", "5", name, check=False, timeout=60)  # -v: its anonymous /data too


def take(base: str, **params: object) -> httpx.Response:
    return httpx.get(f"{base}/v1/screenshot/take", params={"access_key": KEY, **params}, timeout=120)


def test_run_in_one_container_as_an_operator_does(image: str, containers: list[str], site: Site,
                                                  tmp_path: Path) -> None:
    """`run` in one container: PNG, full page and PDF as on the host, tini as PID 1, every process uid 10001,
    Chromium sandboxed (the seccomp profile allows its user namespaces), the health check, and SIGTERM with a
    capture in flight answering it before the container exits 0."""
    port = free_port()
    name = f"image-test-run-{uuid.uuid4().hex[:8]}"
    containers.append(name)
    volume = f"{name}-data"  # a named volume, as in docs/operating.md: the image's /data (uid 10001) copied up
    containers.append(f"volume:{volume}")
    run_container(image, name, "run", env={
        "SCREENSHOT_PORT": str(port), "SCREENSHOT_WORKERS": "1", "SCREENSHOT_ACCESS_KEY": KEY,
        "SCREENSHOT_ALLOW_PRIVATE_NETWORKS": "true"}, options=("--volume", f"{volume}:/data"))
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: httpx.get(f"{base}/readyz").status_code == 200, 180, "run in the container")
    shot = take(base, url=site.url("/colours.html"), viewport_width=200, viewport_height=100)
    assert shot.status_code == 200, shot.text
    picture = pyvips.Image.new_from_buffer(shot.content, "")
    assert (picture.width, picture.height) == (200, 100) and picture.getpoint(100, 10)[:3] == [255, 0, 0]
    whole = take(base, url=site.url("/tall.html"), full_page="true", viewport_width=400, viewport_height=300)
    assert whole.status_code == 200 and pyvips.Image.new_from_buffer(whole.content, "").height == 3000
    printed = take(base, url=site.url("/article.html"), format="pdf")
    assert printed.status_code == 200 and printed.content.startswith(b"%PDF")
    # What the image leaves out of its packages (Dockerfile: dpkg's path-exclude, stripped symbols) takes nothing
    # a capture loads: ffmpeg's video, the ad blocker's engine, libvips's WebP, and every library they link.
    video = httpx.get(f"{base}/v1/screenshot/animate", params={
        "access_key": KEY, "url": site.url("/colours.html"), "duration": 1, "viewport_width": 200,
        "viewport_height": 100}, timeout=120)
    assert video.status_code == 200 and video.content[4:8] == b"ftyp", video.text[:300]
    blocked = take(base, url=site.url("/colours.html"), viewport_width=200, viewport_height=100, block_ads="true",
                   format="webp")
    assert blocked.status_code == 200 and blocked.content[:4] == b"RIFF", blocked.text[:300]
    # Nor what the venv leaves of its packages' data (Dockerfile): Babel's English locale for trafilatura's main
    # content, botocore's S3 model against an S3-compatible server, and the models its credential providers need.
    article = take(base, url=site.url("/article.html"), format="markdown", markdown_content="main")
    assert article.status_code == 200 and "Quarterly report" in article.text, article.text[:300]
    with s3_server() as s3:
        bucket = s3.new_bucket()
        stored = podman("exec", *(item for key, value in S3_ENV.items() for item in ("-e", f"{key}={value}")), name,
                        "/opt/venv/bin/python", "-c", STORE_IN_S3, s3.url, bucket, check=False)
        assert stored.returncode == 0, stored.stdout + stored.stderr
        assert boto3.client("s3", endpoint_url=s3.url, region_name="us-east-1").get_object(
            Bucket=bucket, Key="image-test.txt")["Body"].read() == b"stored from the image"
    linked = podman("exec", name, "sh", "-c", "ldd /usr/bin/ffmpeg /usr/bin/gs "
                    "/usr/lib/chromium/chromium-headless-shell $(find /opt/venv -type f -name '*.so*') "
                    "| grep 'not found' || true")
    assert not linked.stdout.strip(), linked.stdout
    for asset in ("", "/playground.js", "/watch.js", "/playground.css", "/sdks.json"):  # installed with the code
        assert httpx.get(f"{base}/playground{asset}").status_code == 200, asset
    top = podman("top", name, "pid", "args").stdout.splitlines()[1:]
    assert top and top[0].split()[0] == "1" and "tini" in top[0], top
    chromium = [line for line in top if "chromium" in line]
    assert chromium and not any("--no-sandbox" in line for line in chromium), chromium
    uids = podman("exec", name, "sh", "-c", "cat /proc/[0-9]*/status | grep ^Uid:").stdout.split("\n")
    assert {line.split()[1] for line in uids if line} == {"10001"}, uids  # every process, Chromium's included
    health = podman("exec", name, "screenshot-service", "healthcheck", check=False)
    assert health.returncode == 0 and "healthy (run)" in health.stdout, health.stdout + health.stderr
    in_flight: dict[str, httpx.Response] = {}
    slow = threading.Thread(target=lambda: in_flight.update(answer=take(
        base, url=site.url("/colours.html"), viewport_width=200, viewport_height=100, delay=4)))
    slow.start()
    time.sleep(1.5)  # the capture is on the worker, waiting out its delay
    stopped = podman("stop", "-t", "120", name, timeout=180)
    slow.join(60)
    assert stopped.returncode == 0
    assert in_flight["answer"].status_code == 200, in_flight["answer"].text
    state = json.loads(podman("inspect", name).stdout)[0]["State"]
    assert state["ExitCode"] == 0, state


def test_the_roles_in_containers_of_their_own(image: str, containers: list[str], site: Site, tmp_path: Path) -> None:
    """Redis, the API, a read-only worker with every capability dropped and the webhook deliverer, each in its own
    container on one Redis: an async capture is rendered, stored where the API serves it, and its webhook arrives."""
    suffix = uuid.uuid4().hex[:8]
    redis_port, api_port = free_port(), free_port()
    data = tmp_path / "data"
    data.mkdir()
    os.chown(data, 10001, 10001)
    shared = ("--volume", f"{data}:/data")
    containers.append(f"image-test-redis-{suffix}")
    podman("run", "-d", "--name", containers[-1], "--network=host", *LIMITS, "--entrypoint", "redis-server", image,
           "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--dir", "/tmp")
    env = {"SCREENSHOT_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0", "SCREENSHOT_PORT": str(api_port),
           "SCREENSHOT_ACCESS_KEY": KEY, "SCREENSHOT_ALLOW_PRIVATE_NETWORKS": "true",
           "SCREENSHOT_JOB_SECRET": uuid.uuid4().hex * 2}
    for role, options in (("api", shared), ("webhooks", shared),
                          ("worker", (*shared, "--read-only", "--tmpfs", "/tmp", "--cap-drop", "all"))):
        containers.append(f"image-test-{role}-{suffix}")
        run_container(image, containers[-1], role, env=env, options=options)
    base = f"http://127.0.0.1:{api_port}"
    wait_for(lambda: httpx.get(f"{base}/readyz").status_code == 200, 180, "the API and its worker")
    with Receiver() as receiver:
        accepted = take(base, url=site.url("/colours.html"), viewport_width=200, viewport_height=100,
                        webhook_url=receiver.url("/hook"), **{"async": "true"})
        assert accepted.status_code == 202, accepted.text
        [delivery] = receiver.wait_for("/hook", timeout=120)
    assert delivery.headers["content-type"] == "image/png"
    picture = pyvips.Image.new_from_buffer(delivery.body, "")
    assert (picture.width, picture.height) == (200, 100) and picture.getpoint(100, 10)[:3] == [255, 0, 0]
    status = f"{base}/v1/screenshot/jobs/{accepted.json()['reference']}"
    wait_for(lambda: httpx.get(status, params={"access_key": KEY}).json()["status"] == "done", 60, "the job's record")
    stored = httpx.get(httpx.get(status, params={"access_key": KEY}).json()["screenshot_url"], timeout=60)
    assert stored.status_code == 200 and stored.content == delivery.body  # stored where the API serves it
    assert any(data.rglob("*.png")), "the result is in the volume the roles share"
