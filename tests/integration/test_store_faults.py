"""The result store failing for real: a fault-injecting proxy between the service and moto's S3 server that
stalls (takes each request and never answers), resets connections and answers 503; and a local store on a tmpfs
too small for a result. Each failing capture answers storage_access_denied naming the store, within the store's
budget (SCREENSHOT_STORAGE_TIMEOUT, not the job's timeout: the answer is not `timeout_error`), charges nothing and
leaves its worker free for the next job, which succeeds once the store is back; an async job tries its upload
again until its own deadline; /metrics counts the failures and the worker's log names the store."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Org
from tests.support.faulty import FaultyProxy, Mode
from tests.support.servers import RunningService, S3Server, metric, redis_server, running_service, wait_for
from tests.support.site import Site

pytestmark = pytest.mark.browser
BUDGET = 3  # SCREENSHOT_STORAGE_TIMEOUT here
JOB_TIMEOUT = 40  # the captures' own, far past BUDGET: an answer within the budget is not the job's timeout
# 400 x 400 pixels of noise: about 480 KB as PNG, far past the small store's 64 KiB.
NOISE = ("<body style=margin:0><canvas id=c width=400 height=400></canvas><script>const g = c.getContext('2d');"
         "const d = g.createImageData(400, 400); for (let i = 0; i < d.data.length; i++) d.data[i] = i % 4 == 3 ? "
         "255 : Math.random() * 255; g.putImageData(d, 0, 0);</script>")


@pytest.fixture(scope="module")
def proxy(s3: S3Server) -> Iterator[FaultyProxy]:
    with FaultyProxy(int(s3.url.rsplit(":", 1)[1])).running() as running:
        yield running


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("store-faults-log") / "service.log"


@pytest.fixture(scope="module")
def faulty(s3: S3Server, proxy: FaultyProxy, logged: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[RunningService, str]]:
    """A service with one worker whose S3 store is behind the proxy."""
    bucket = s3.new_bucket()
    data = tmp_path_factory.mktemp("store-faults")
    (data / "redis").mkdir()
    with (logged.open("wb") as log, redis_server(data / "redis") as redis_url,
          running_service(redis_url, data, workers=1, log=log, **{
              **s3.service_env(bucket), "SCREENSHOT_S3_ENDPOINT_URL": proxy.url,
              "SCREENSHOT_STORAGE_TIMEOUT": str(BUDGET)}) as running):
        yield running, bucket


@pytest.fixture
def faulty_org(faulty: tuple[RunningService, str], make_org_in) -> Org:  # type: ignore[no-untyped-def]
    return make_org_in(faulty[0].redis_url)  # type: ignore[no-any-return]


@contextlib.contextmanager
def mode(proxy: FaultyProxy, now: Mode) -> Iterator[None]:
    proxy.mode = now
    try:
        yield
    finally:
        proxy.mode = "pass"


def take(http: httpx.Client, org: Org, site: Site, **extra: Any) -> httpx.Response:
    return http.get("/v1/screenshot/take", params={
        "access_key": org.access_key, "url": site.url("/colours.html"), "viewport_width": "200",
        "viewport_height": "100", "response_type": "json", "timeout": str(JOB_TIMEOUT), **extra})


def used(http: httpx.Client, org: Org) -> int:
    return int(http.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"])


@pytest.mark.parametrize("fault", ["stall", "reset", "503"])
def test_a_failing_store_is_storage_access_denied_in_its_budget_uncharged_and_the_worker_goes_on(
        faulty: tuple[RunningService, str], faulty_org: Org, proxy: FaultyProxy, site: Site, logged: Path,
        fault: Mode) -> None:
    service, bucket = faulty
    with httpx.Client(base_url=service.url, timeout=JOB_TIMEOUT + 30) as http:
        failures = metric(http, 'screenshot_storage_failures_total{reason="timeout"}') + metric(
            http, 'screenshot_storage_failures_total{reason="error"}')
        with mode(proxy, fault):
            started = time.monotonic()
            refused = take(http, faulty_org, site)
            took = time.monotonic() - started
        answer = refused.json()
        assert (refused.status_code, answer["error_code"]) == (400, "storage_access_denied"), refused.text
        assert f"bucket '{bucket}'" in answer["error_message"], answer
        if fault == "stall":
            assert f"did not answer within {BUDGET} s" in answer["error_message"], answer
        assert proxy.met[fault] >= 1
        assert used(http, faulty_org) == 0
        # The one worker is free: the next capture, the store back, succeeds at once and is charged.
        stored = take(http, faulty_org, site)
        assert stored.status_code == 200, stored.text
        assert httpx.get(stored.json()["screenshot_url"]).status_code == 200
        assert used(http, faulty_org) == 1
        wait_for(lambda: metric(http, 'screenshot_storage_failures_total{reason="timeout"}') + metric(
            http, 'screenshot_storage_failures_total{reason="error"}') > failures, 10, "the failure in /metrics")
    assert f"bucket '{bucket}'" in logged.read_text(errors="replace")
    print(f"{fault}: storage_access_denied after {took:.1f} s")  # noqa: T201 - the figure for the notes


def test_an_async_job_tries_its_upload_again_until_the_store_answers(
        faulty: tuple[RunningService, str], faulty_org: Org, proxy: FaultyProxy, site: Site) -> None:
    service, _ = faulty
    with httpx.Client(base_url=service.url, timeout=60) as http:
        retried = metric(http, 'screenshot_storage_failures_total{reason="retried"}')
        stalled = proxy.met["stall"]
        with mode(proxy, "stall"):
            queued = take(http, faulty_org, site, **{"async": "true"})
            assert queued.status_code == 202, queued.text
            wait_for(lambda: proxy.met["stall"] > stalled, 30, "the job's first try at the store")
        reference = queued.json()["reference"]
        job: dict[str, Any] = {}

        def done() -> bool:
            job.update(http.get(f"/v1/screenshot/jobs/{reference}",
                                params={"access_key": faulty_org.access_key}).json())
            return job.get("status") not in ("queued", "rendering")

        wait_for(done, JOB_TIMEOUT + 30, "the async job")
        assert job["status"] == "done", job
        assert used(http, faulty_org) == 1
        wait_for(lambda: metric(http, 'screenshot_storage_failures_total{reason="retried"}') > retried, 10,
                 "the retry in /metrics")


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 64 KiB tmpfs for the local store (mounting needs root, which the test machines give; where it is refused
    the test is skipped with the reason)."""
    directory = tmp_path_factory.mktemp("small-store")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(directory)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def test_a_full_disk_is_storage_access_denied_leaving_no_part_and_images_go_on(
        small_disk: Path, redis_url: str, make_org_in, site: Site,  # type: ignore[no-untyped-def]
        tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("full-disk")
    database = redis_url.rsplit("/", 1)[0] + "/6"
    with running_service(database, data, workers=1, SCREENSHOT_STORAGE_DIR=str(small_disk)) as service:
        org = make_org_in(service.redis_url)
        with httpx.Client(base_url=service.url, timeout=JOB_TIMEOUT + 30) as http:
            noisy = http.get("/v1/screenshot/take", params={
                "access_key": org.access_key, "html": NOISE, "viewport_width": "400", "viewport_height": "400",
                "response_type": "json"})
            assert (noisy.status_code, noisy.json()["error_code"]) == (400, "storage_access_denied"), noisy.text
            assert str(small_disk) in noisy.json()["error_message"]
            assert used(http, org) == 0
            assert not [path for path in small_disk.rglob("*") if path.is_file() and path.name.startswith(".tmp-")]
            # An image answered directly needs no store.
            image = http.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": site.url(
                "/colours.html"), "viewport_width": "200", "viewport_height": "100"})
            assert image.status_code == 200 and image.headers["content-type"] == "image/png"
            assert used(http, org) == 1
