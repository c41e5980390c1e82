"""Async captures, signed webhooks with retries that survive restarts, and job status, on a service of
the module's own (its own Redis database, retry schedule shortened to 1 s, receivers cut at 2 s)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import io
import json
import re
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from render.contract import archives
from service.settings import default_workers
from tests.conftest import Org, create_org
from tests.support.archive_tools import archive_problems
from tests.support.images import decode, near, rgb_at
from tests.support.receivers import Received, Receiver
from tests.support.servers import RunningService, running_service
from tests.support.site import Site

pytestmark = pytest.mark.browser
# RQ's scheduler keeps due times in whole seconds: an interval of N s waits between N - 1 and N + 1 s.
SCHEDULE = "2,2,2,2,2"


@pytest.fixture(scope="module")
def isolated(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    own_database = redis_url.rsplit("/", 1)[0] + "/6"
    directory = tmp_path_factory.mktemp("async-service")
    with (directory / "service.log").open("wb") as log, running_service(
            own_database, directory, workers=default_workers(), log=log, SCREENSHOT_LOG_LEVEL="INFO",
            SCREENSHOT_WEBHOOK_RETRY_SCHEDULE=SCHEDULE, SCREENSHOT_WEBHOOK_TIMEOUT="2") as running:
        yield running


@dataclass
class LateJob:
    """An async capture with a delay beyond the synchronous limit, sent when the module starts: its 31 s pass
    while the module's other tests run (on the other worker), and its own test, last, checks how it ended."""

    receiver: Receiver
    accepted: float


@pytest.fixture(scope="module", autouse=True)
def late_job(isolated: RunningService, site: Site) -> Iterator[LateJob]:
    org = asyncio.run(create_org(isolated.redis_url, quota=10, concurrency=2))  # its own: the others count usage
    with Receiver() as receiver, httpx.Client(base_url=isolated.url, timeout=60) as http:
        response = take(http, org, site, **{"async": "true", "delay": "31", "timeout": "120",
                                            "webhook_url": receiver.url("/late")})
        assert response.status_code == 202, response.text
        yield LateJob(receiver, time.time())


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


def take(http: httpx.Client, org: Org, site: Site, path: str = "/colours.html",
         _headers: dict[str, str] | None = None, **params: str) -> httpx.Response:
    return http.get("/v1/screenshot/take", headers=_headers, params={
        "access_key": org.access_key, "url": site.url(path), "viewport_width": "200", "viewport_height": "100",
        **params})


def status(http: httpx.Client, org: Org, reference: str) -> httpx.Response:
    return http.get(f"/v1/screenshot/jobs/{reference}", params={"access_key": org.access_key})


def wait_status(http: httpx.Client, org: Org, reference: str, wanted: set[str], timeout: float = 60) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = status(http, org, reference).json()
        if body["status"] in wanted:
            return body  # type: ignore[no-any-return]
        time.sleep(0.1)
    raise TimeoutError(f"job {reference} never reached {wanted}")


def usage(http: httpx.Client, org: Org) -> dict:  # type: ignore[type-arg]
    return http.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()  # type: ignore[no-any-return]


def signed_by(delivery: Received, org: Org) -> bool:
    expected = hmac.new(org.signing_key.encode(), delivery.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(delivery.headers.get("x-service-signature", ""), expected)


def test_async_answers_at_once_and_posts_the_image_signed(isolated_http: httpx.Client, isolated_org: Org,
                                                          site: Site, receiver: Receiver) -> None:
    response = take(isolated_http, isolated_org, site, **{
        "async": "true", "webhook_url": receiver.url("/hook"), "external_identifier": "order-42"})
    assert response.status_code == 202, response.text
    reference = response.json()["reference"]
    assert response.json() == {"is_successful": True, "reference": reference}
    assert response.headers["x-service-external-identifier"] == "order-42"

    [delivery] = receiver.wait_for("/hook")
    assert delivery.method == "POST" and delivery.headers["content-type"] == "image/png"
    image = decode(delivery.body)
    assert (image.width, image.height) == (200, 100)
    assert near(rgb_at(image, 100, 20), (255, 0, 0)) and near(rgb_at(image, 100, 80), (0, 0, 255))
    assert delivery.headers["x-service-reference"] == reference
    assert delivery.headers["x-service-external-identifier"] == "order-42"
    assert delivery.headers["x-service-size-bytes"] == str(len(delivery.body))
    assert signed_by(delivery, isolated_org)

    done = wait_status(isolated_http, isolated_org, reference, {"done"})
    assert done["webhook"]["status"] in ("delivering", "delivered")
    assert httpx.get(done["screenshot_url"]).content == delivery.body
    assert usage(isolated_http, isolated_org)["used"] == 1
    assert usage(isolated_http, isolated_org)["concurrency"]["remaining"] == 10


def test_json_webhook_unsigned_when_asked(isolated_http: httpx.Client, isolated_org: Org, site: Site,
                                          receiver: Receiver) -> None:
    response = take(isolated_http, isolated_org, site, **{
        "async": "true", "webhook_url": receiver.url("/json"), "response_type": "json", "webhook_sign": "false",
        "metadata_image_size": "true"})
    assert response.status_code == 202
    [delivery] = receiver.wait_for("/json")
    body = delivery.json()
    assert body["is_successful"] is True and body["metadata"]["image_size"] == {"width": 200, "height": 100}
    assert decode(httpx.get(body["screenshot_url"]).content).width == 200
    assert "x-service-signature" not in delivery.headers


def test_what_happened_on_the_page_reaches_the_webhook(isolated_http: httpx.Client, isolated_org: Org, site: Site,
                                                       receiver: Receiver) -> None:
    """Console, timings, quality, the HAR and the certificate travel with an async capture as with a waiting one."""
    response = take(isolated_http, isolated_org, site, "/evidence/console.html", **{
        "async": "true", "webhook_url": receiver.url("/evidence"), "response_type": "json", "har": "true",
        "metadata_console": "true", "metadata_timings": "true", "metadata_quality": "true", "certify": "true",
        "archive": "true"})
    assert response.status_code == 202
    [delivery] = receiver.wait_for("/evidence")
    body = delivery.json()
    archived = httpx.get(body["archive"]["url"]).content  # the web archive, the certificate inside it
    assert archive_problems(archived) == [] and body["archive"]["truncated"] == 0
    assert delivery.headers["x-service-archive-url"] == body["archive"]["url"]
    inside = zipfile.ZipFile(io.BytesIO(archived)).read(archives.CERTIFICATE_PATH)
    assert inside == httpx.get(body["certificate"]["url"]).content
    done = wait_status(isolated_http, isolated_org, response.json()["reference"], {"done"})
    assert done["archive"]["truncated"] == 0 and archive_problems(httpx.get(done["archive"]["url"]).content) == []
    assert body["metadata"]["console"]["errors"] == 2 and body["metadata"]["quality"]["flags"] == []
    assert body["metadata"]["timings"]["fired"] == "load" and "capture" in body["metadata"]["timings"]["stages_ms"]
    assert "capture;dur=" in delivery.headers["server-timing"]
    assert delivery.headers["x-service-console-errors"] == "2"
    har = httpx.get(body["har"]["url"]).json()
    assert har["log"]["entries"][0]["request"]["url"] == site.url("/evidence/console.html")
    certificate = httpx.get(body["certificate"]["url"]).json()
    assert {a["name"] for a in certificate["manifest"]["artefacts"]} == {"output", "har"}
    assert certificate["manifest"]["metadata"]["console"]["errors"] == 2


def test_failures_reach_the_webhook_only_with_webhook_errors(isolated_http: httpx.Client, isolated_org: Org,
                                                             site: Site, receiver: Receiver) -> None:
    failing = {"async": "true", "url": site.url("/status?code=500")}
    quiet = take(isolated_http, isolated_org, site, **failing, webhook_url=receiver.url("/quiet"))
    told = take(isolated_http, isolated_org, site, **failing, webhook_url=receiver.url("/told"),
                webhook_errors="true", external_identifier="x-1")
    [delivery] = receiver.wait_for("/told")
    assert delivery.json()["error_code"] == "host_returned_error"
    assert delivery.json()["returned_status_code"] == 500
    assert delivery.headers["x-service-error-code"] == "host_returned_error"
    assert "500" in delivery.headers["x-service-error-message"]
    assert delivery.headers["x-service-reference"] == told.json()["reference"]
    assert delivery.headers["x-service-external-identifier"] == "x-1"
    assert signed_by(delivery, isolated_org)
    failed = wait_status(isolated_http, isolated_org, quiet.json()["reference"], {"failed"})
    assert failed["error_code"] == "host_returned_error" and "screenshot_url" not in failed
    time.sleep(1.5)  # time enough for a delivery that should not happen
    assert receiver.to("/quiet") == []
    assert usage(isolated_http, isolated_org)["used"] == 0


def test_undelivered_webhooks_are_retried_on_the_schedule(isolated: RunningService, isolated_http: httpx.Client,
                                                          isolated_org: Org, site: Site) -> None:
    def flaky(received: Received) -> tuple[int, dict[str, str], bytes]:
        if received.path == "/twice" and len(receiver.to("/twice")) <= 2:
            return 503, {}, b""
        if received.path == "/hang" and len(receiver.to("/hang")) == 1:
            time.sleep(4)  # past SCREENSHOT_WEBHOOK_TIMEOUT=2: this attempt is cut
        if received.path == "/never":
            return 500, {}, b""
        return 200, {}, b""

    with Receiver(flaky) as receiver:
        twice = take(isolated_http, isolated_org, site, **{"async": "true", "webhook_url": receiver.url("/twice")})
        take(isolated_http, isolated_org, site, **{"async": "true", "webhook_url": receiver.url("/hang")})
        never = take(isolated_http, isolated_org, site, **{"async": "true", "webhook_url": receiver.url("/never")})
        attempts = receiver.wait_for("/twice", 3)
        assert [b.at - a.at >= 1 for a, b in zip(attempts, attempts[1:], strict=False)] == [True, True]
        assert all(a.body == attempts[0].body for a in attempts)
        assert len(receiver.wait_for("/hang", 2)) == 2
        assert len(receiver.wait_for("/never", 6)) == 6
        deadline = time.monotonic() + 20
        while status(isolated_http, isolated_org, never.json()["reference"]).json()["webhook"]["status"] != "failed":
            assert time.monotonic() < deadline, "the last attempt was never recorded as given up"
            time.sleep(0.2)
        time.sleep(2.5)
        assert len(receiver.to("/never")) == 6  # six attempts in all, then given up
        record = status(isolated_http, isolated_org, twice.json()["reference"]).json()
        assert record["webhook"] == {"status": "delivered", "attempts": 3}
        exported = isolated_http.get("/metrics").text
        assert 'screenshot_webhook_deliveries_total{outcome="given_up"} 1.0' in exported
        failed_attempts = [line for line in exported.splitlines()
                           if line.startswith('screenshot_webhook_deliveries_total{outcome="failed_attempt"}')]
        assert float(failed_attempts[0].split()[-1]) >= 2 + 1 + 5  # /twice, /hang, /never
    # Each failed attempt is one INFO line, the given-up delivery one WARNING: no ERROR, no stack trace.
    lines = [json.loads(line) for line in (isolated.data_dir / "service.log").read_text().splitlines()
             if line.startswith("{")]
    webhook_lines = [line for line in lines if "webhook" in line["message"] or line["logger"].startswith("rq")]
    assert not [line for line in webhook_lines if line["level"] == "ERROR" or "exception" in line]
    assert [line["level"] for line in webhook_lines if "given up" in line["message"]] == ["WARNING"]
    assert len([line for line in webhook_lines if "retrying" in line["message"]]) >= 2 + 1 + 5


def test_a_pending_delivery_survives_a_deliverer_restart(isolated: RunningService, isolated_http: httpx.Client,
                                                       isolated_org: Org, site: Site) -> None:
    def first_fails(received: Received) -> tuple[int, dict[str, str], bytes]:
        return (500 if len(receiver.to("/after-restart")) == 1 else 200), {}, b""

    with Receiver(first_fails) as receiver:
        take(isolated_http, isolated_org, site, **{"async": "true", "webhook_url": receiver.url("/after-restart")})
        receiver.wait_for("/after-restart")
        isolated.restart("webhooks")  # the retry is scheduled in Redis, not in the process
        attempts = receiver.wait_for("/after-restart", 2, timeout=90)
        assert attempts[1].body == attempts[0].body


def test_the_deliverer_stops_at_once_on_sigterm(isolated: RunningService) -> None:
    """SIGTERM ends an idle webhook deliverer within seconds, with status 0: it serves again after a Redis error
    (service.deliverer.main.run_deliverer), never after being told to stop."""
    process = isolated.processes["webhooks"]
    time.sleep(2)  # serving: RQ's worker registered and waiting for a delivery
    process.terminate()
    try:
        assert process.wait(10) == 0
    finally:
        isolated.restart("webhooks")


def test_a_delivery_cut_short_by_a_deliverer_crash_is_made_again_by_the_next_deliverer(
        isolated: RunningService, isolated_http: httpx.Client, isolated_org: Org, site: Site) -> None:
    """The deliverer is killed while the receiver holds its attempt: the next deliverer sends it again at once
    (RQ alone would notice only once the attempt's started entry expires), with the same idempotency key."""
    holding, release = threading.Event(), threading.Event()

    def hold_the_first(received: Received) -> tuple[int, dict[str, str], bytes]:
        if not holding.is_set():
            holding.set()
            release.wait(10)
        return 200, {}, b""

    log_path = isolated.data_dir / "service.log"
    start = log_path.stat().st_size
    with Receiver(hold_the_first) as receiver:
        reference = take(isolated_http, isolated_org, site, **{
            "async": "true", "webhook_url": receiver.url("/cut")}).json()["reference"]
        assert holding.wait(60), "no delivery came"
        isolated.restart("webhooks", kill=True)
        release.set()
        first, again = receiver.wait_for("/cut", 2, timeout=60)
    assert again.body == first.body
    assert again.headers["idempotency-key"] == first.headers["idempotency-key"] == reference
    with log_path.open("rb") as log:
        log.seek(start)
        said = log.read().decode()
    assert f"the delivery of {reference} was interrupted" in said
    # The receiver has the second attempt; its deliverer records the outcome just after the answer comes back.
    deadline = time.monotonic() + 30
    while (webhook := wait_status(isolated_http, isolated_org, reference, {"done"})["webhook"])["status"] \
            == "delivering" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert webhook["status"] == "delivered"


def test_job_status_of_unknown_and_foreign_jobs(isolated_http: httpx.Client, isolated_org: Org, site: Site,
                                                make_org_in, isolated: RunningService) -> None:  # type: ignore[no-untyped-def]
    done = take(isolated_http, isolated_org, site)
    reference = done.headers["x-service-reference"]
    assert status(isolated_http, isolated_org, reference).json()["status"] == "done"
    stranger = make_org_in(isolated.redis_url)
    for who, ref in ((stranger, reference), (isolated_org, "nope")):
        response = status(isolated_http, who, ref)
        assert response.status_code == 404
        assert response.json()["error_code"] == "request_not_valid"
        assert response.json()["error_details"][0]["field"] == "reference"


def cancel(http: httpx.Client, org: Org, reference: str) -> httpx.Response:
    return http.delete(f"/v1/screenshot/jobs/{reference}", params={"access_key": org.access_key})


def test_a_queued_job_is_cancelled_uncharged_and_a_rendering_one_runs_to_its_end(
        isolated: RunningService, isolated_http: httpx.Client, make_org_in, site: Site) -> None:  # type: ignore[no-untyped-def]
    """DELETE /jobs/{reference}: a job no worker has started is never rendered (the worker that reaches it drops
    it), charges nothing and frees its concurrency slot at once; one rendering, or done, is not cancelled and the
    answer says what was charged; another organisation's job is not found. A done job's status answers what the
    synchronous JSON answer holds (format, size, metadata)."""
    org = make_org_in(isolated.redis_url, concurrency=default_workers() + 1)
    blockers = [take(isolated_http, org, site, **{"async": "true", "delay": "2", "metadata_page_title": "true"}
                     ).json()["reference"] for _ in range(default_workers())]  # every free worker busy 2 s
    rendering = blockers[0]  # the organisation's first: the first of its jobs a worker takes
    wait_status(isolated_http, org, rendering, {"rendering"})
    deadline = time.monotonic() + 10  # and what it is doing: its `delay` is the stage of waits
    while status(isolated_http, org, rendering).json().get("stage") != "waits":
        assert time.monotonic() < deadline, status(isolated_http, org, rendering).json()
        time.sleep(0.05)
    target = take(isolated_http, org, site, **{"async": "true"}).json()["reference"]  # behind the blockers
    assert usage(isolated_http, org)["concurrency"]["remaining"] == 0
    stopped = cancel(isolated_http, org, target)
    assert stopped.status_code == 200, stopped.text
    assert stopped.json() | {"message": ""} == {"is_successful": True, "reference": target, "status": "cancelled",
                                               "cancelled": True, "charged": False, "message": ""}
    assert usage(isolated_http, org)["concurrency"]["remaining"] == 1  # its slot is free at once
    busy = cancel(isolated_http, org, rendering).json()
    assert busy["status"] == "rendering" and busy["cancelled"] is False and "charged" not in busy
    assert "runs to its end" in busy["message"]
    stranger = make_org_in(isolated.redis_url)
    assert cancel(isolated_http, stranger, target).status_code == 404
    assert cancel(isolated_http, org, "nope").status_code == 404
    done = [wait_status(isolated_http, org, ref, {"done"}) for ref in blockers]
    assert all(body["format"] == "png" and body["size_bytes"] > 0 and body["metadata"] == {"page_title": ""}
               for body in done), done  # the page has no title; the synchronous answer says the same
    assert decode(httpx.get(done[0]["screenshot_url"], timeout=30).content).width == 200
    again = cancel(isolated_http, org, blockers[0]).json()
    assert (again["status"], again["cancelled"], again["charged"]) == ("done", False, True)
    twice = cancel(isolated_http, org, target).json()
    assert (twice["status"], twice["cancelled"], twice["charged"]) == ("cancelled", False, False)
    log_file = isolated.data_dir / "service.log"
    deadline = time.monotonic() + 30
    while f"job {target} was cancelled before it started; dropped" not in log_file.read_text(errors="replace"):
        assert time.monotonic() < deadline, "no worker reached the cancelled job"
        time.sleep(0.2)
    assert status(isolated_http, org, target).json()["status"] == "cancelled"  # never rendered
    assert usage(isolated_http, org)["used"] == len(blockers)


def test_sync_requests_with_a_webhook_answer_and_deliver(isolated_http: httpx.Client, isolated_org: Org,
                                                         site: Site, receiver: Receiver) -> None:
    response = take(isolated_http, isolated_org, site, webhook_url=receiver.url("/sync"), external_identifier="s")
    assert response.status_code == 200 and response.headers["x-service-external-identifier"] == "s"
    [delivery] = receiver.wait_for("/sync")
    assert delivery.body == response.content and signed_by(delivery, isolated_org)


@pytest.mark.parametrize(("params", "field"), [
    ({"async": "true", "cache": "true"}, "cache"),
    ({"webhook_url": "ftp://example.com/"}, "webhook_url"),
    ({"async": "true", "timeout": "301"}, "timeout"),
])
def test_bad_async_parameters(isolated_http: httpx.Client, isolated_org: Org, site: Site,
                              params: dict[str, str], field: str) -> None:
    response = take(isolated_http, isolated_org, site, **params)
    assert response.status_code == 400
    assert field in [d["field"] for d in response.json()["error_details"]]
    assert usage(isolated_http, isolated_org)["concurrency"]["remaining"] == 10


def test_an_access_log_line_per_request_under_the_callers_trace_id(
        isolated: RunningService, isolated_http: httpx.Client, isolated_org: Org, site: Site) -> None:
    log_path = isolated.data_dir / "service.log"
    start = log_path.stat().st_size
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    traced = take(isolated_http, isolated_org, site, viewport_width="320",
                  _headers={"traceparent": f"00-{trace}-00f067aa0ba902b7-01"})
    assert traced.headers["x-service-trace-id"] == trace
    usage = isolated_http.get("/v1/screenshot/usage", params={"access_key": isolated_org.access_key},
                              headers={"x-request-id": "client-42"})
    assert usage.headers["x-service-trace-id"] == "client-42"  # every answer carries it, not only captures
    forged = isolated_http.get("/v1/screenshot/usage", headers={"x-request-id": 'x" level=ERROR'})
    assert re.fullmatch(r"[0-9a-f]{32}", forged.headers["x-service-trace-id"])  # not a token: a new id
    with Receiver(lambda received: (500, {}, b"")) as receiver:
        take(isolated_http, isolated_org, site, _headers={"x-request-id": "async-7"},
             **{"async": "true", "webhook_url": receiver.url("/down")})
        receiver.wait_for("/down")
        time.sleep(0.5)  # the deliverer writes its line after the attempt
    with log_path.open("rb") as log:
        log.seek(start)
        lines = [json.loads(line) for line in log.read().decode().splitlines() if line.startswith("{")]
    access = [line for line in lines if line["logger"] == "service.access"]
    [line] = [line for line in access if line.get("trace_id") == trace]
    assert {k: line[k] for k in ("method", "path", "route", "status", "organisation", "level")} == {
        "method": "GET", "path": "/v1/screenshot/take", "route": "/v1/screenshot/take", "status": 200,
        "organisation": isolated_org.id, "level": "INFO"}
    assert line["duration_ms"] > 0 and line["message"].startswith("GET /v1/screenshot/take 200 ")
    assert isolated_org.access_key not in log_path.read_text()  # the path only, never the query
    [refused] = [line for line in access if line.get("trace_id") == forged.headers["x-service-trace-id"]]
    assert refused["status"] == 400 and refused["error_code"] == "access_key_required"
    assert refused["organisation"] is None
    # The async job's webhook attempt is logged under the trace id of the request that asked for it.
    assert [line["trace_id"] for line in lines if "not delivered" in line["message"]] == ["async-7"]
    assert not [line for line in lines if line["logger"].startswith(("httpx", "httpcore"))]  # no URLs at INFO


def test_async_captures_take_delays_beyond_the_synchronous_limit(late_job: LateJob) -> None:
    [delivery] = late_job.receiver.wait_for("/late", timeout=120)
    assert delivery.at - late_job.accepted >= 31  # the delay was waited, not clipped to the synchronous 30 s
    assert decode(delivery.body).width == 200
