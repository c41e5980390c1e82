"""Surviving faults, on a service of the module's own (its own redis-server, two API processes, two
workers): a mixed load over both APIs, a worker killed or stopped mid-job, Chromium killed mid-job, the
API stopped with requests in flight, Redis stopped and started again, hostile pages."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
import redis

from tests.conftest import Org
from tests.support.servers import RunningService, free_port, metric, process_tree, running_service, wait_for
from tests.support.site import Site

pytestmark = pytest.mark.browser
WORKERS = 2


class RestartableRedis:
    """A redis-server with an append-only file, so it can stop and come back with its data."""

    def __init__(self, data_dir: Path) -> None:
        self.dir, self.port = data_dir, free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir), "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--loglevel", "warning"], stdout=subprocess.DEVNULL)
        wait_for(lambda: redis.Redis.from_url(self.url).ping(), 10, "redis-server")

    def stop(self) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(10)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableRedis]:
    server = RestartableRedis(tmp_path_factory.mktemp("faults-redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def isolated(store: RestartableRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    # Chromium told to free its memory after every job (a budget of 1 MiB): the relief must survive the faults.
    # Redis down and workers killed are told apart from a failover sooner than by default (docs/settings.md).
    with running_service(store.url, tmp_path_factory.mktemp("faults-service"), workers=WORKERS, apis=2,
                         SCREENSHOT_RESULT_WAIT_GRACE="2", SCREENSHOT_CHROMIUM_MEMORY_MB="1",
                         SCREENSHOT_REDIS_RETRY_SECONDS="2", SCREENSHOT_WORKER_GRACE="1") as running:
        yield running


@pytest.fixture
def fresh_org(store: RestartableRedis, make_org_in) -> Org:  # type: ignore[no-untyped-def]
    return make_org_in(store.url, quota=100, concurrency=4)  # type: ignore[no-any-return]


def take(http: httpx.Client, org: Org, url: str, **params: str) -> httpx.Response:
    return http.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": url, "viewport_width": "200",
                                                   "viewport_height": "100", **params}, timeout=60)


def usage(http: httpx.Client, org: Org) -> dict:  # type: ignore[type-arg]
    return http.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()  # type: ignore[no-any-return]


def rendering_worker(store: RestartableRedis, other_than: str = "") -> str:
    """The name of the worker rendering the one job in progress (a worker other than `other_than`)."""
    connection = redis.Redis.from_url(store.url)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for key in connection.scan_iter("job:*"):
            record = connection.hgetall(key)
            if record.get(b"status") == b"rendering" and record.get(b"worker", b"").decode() not in ("", other_than):
                return record[b"worker"].decode()
        time.sleep(0.05)
    raise TimeoutError("no job started rendering")


def role_of(isolated: RunningService, worker_name: str) -> str:
    pid = int(worker_name.split(".")[-2])
    return next(role for role, process in isolated.processes.items() if process.pid == pid)


def in_background(call):  # type: ignore[no-untyped-def]
    box: dict[str, object] = {}
    thread = threading.Thread(target=lambda: box.setdefault("value", call()))
    thread.start()
    return thread, box


def test_several_apis_and_workers_serve_a_mixed_load_and_count_usage_once(
        isolated: RunningService, store: RestartableRedis, fresh_org: Org, site: Site) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from tests.support.images import decode

    colours = site.url("/colours.html")
    requests: list[tuple[dict[str, str], str]] = (
        # Two slow captures first, sent together: while one worker renders one, the other must take the other.
        [({"url": site.url("/slow?ms=1500")}, "image/png")] * 2
        + [({"url": colours}, "image/png")] * 4
        + [({"url": colours, "format": "jpeg"}, "image/jpeg")] * 2
        + [({"html": "<h1>PDF</h1>", "format": "pdf"}, "application/pdf")] * 2
        + [({"url": colours, "viewport_width": "-1"}, "request_not_valid")] * 2
        + [({"url": "http://127.0.0.1:1/"}, "network_error")] * 2)
    connection = redis.Redis.from_url(store.url)
    known_jobs = set(connection.scan_iter("job:*"))

    def send(numbered: tuple[int, tuple[dict[str, str], str]]) -> tuple[httpx.Response, str]:
        number, (params, expected) = numbered
        with httpx.Client(base_url=isolated.urls[number % len(isolated.urls)], timeout=60) as http:
            return http.get("/v1/screenshot/take", params={
                "access_key": fresh_org.access_key, "viewport_width": "200", "viewport_height": "100",
                **params}), expected

    with ThreadPoolExecutor(4) as pool:  # the organisation's concurrency
        answers = list(pool.map(send, enumerate(requests)))
    successes = 0
    for response, expected in answers:
        if "/" in expected:
            assert response.status_code == 200, response.text
            assert response.headers["content-type"] == expected
            if expected != "application/pdf":
                assert (decode(response.content).width, decode(response.content).height) == (200, 100)
            else:
                assert response.content.startswith(b"%PDF")
            successes += 1
        else:
            assert response.status_code >= 400 and response.json()["error_code"] == expected, response.text
    with httpx.Client(base_url=isolated.urls[1]) as http:
        record = usage(http, fresh_org)
    assert record["used"] == successes == 10
    assert record["concurrency"]["remaining"] == 4
    workers = {connection.hget(key, "worker") for key in set(connection.scan_iter("job:*")) - known_jobs}
    assert len(workers - {None}) == WORKERS, "the jobs were spread over every worker"


def test_a_worker_killed_mid_job_is_a_clear_error_uncharged_and_the_others_carry_on(
        isolated: RunningService, store: RestartableRedis, fresh_org: Org, site: Site) -> None:
    with httpx.Client(base_url=isolated.url) as http:
        thread, box = in_background(lambda: take(http, fresh_org, site.url("/slow?ms=8000"), timeout="30"))
        victim = role_of(isolated, rendering_worker(store))
        os.killpg(isolated.processes[victim].pid, signal.SIGKILL)  # the worker and its Chromium
        thread.join(30)
        response = box["value"]
        assert isinstance(response, httpx.Response)
        assert response.status_code == 500, response.text
        assert response.json()["error_code"] == "internal_application_error"
        assert "stopped" in response.json()["error_message"]
        record = usage(http, fresh_org)
        assert record["used"] == 0 and record["concurrency"]["remaining"] == 4
        survivor = take(http, fresh_org, site.url("/colours.html"))
        assert survivor.status_code == 200 and usage(http, fresh_org)["used"] == 1
        isolated.restart(victim)
        wait_for(lambda: http.get("/readyz").json()["workers"] >= WORKERS, 60, "the restarted worker")


def kill_browsers(worker_pid: int) -> list[int]:
    """SIGKILL every Chromium process under a worker; the ones it killed."""
    browsers = [pid for pid in process_tree(worker_pid)[1:] if "chrom" in Path(f"/proc/{pid}/comm").read_text()]
    for pid in browsers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return browsers


def slow_capture_underway(http: httpx.Client, isolated: RunningService, store: RestartableRedis, org: Org,
                          site: Site, ms: int) -> tuple[int, threading.Thread, dict[str, object], subprocess.Popen]:
    """A capture of a page that takes `ms` to load, sent in the background and loading on a worker: the
    page's loads so far (before it), the client's thread and answer box, and the worker's process."""
    loading = len(site.requests_to("/slow"))
    thread, box = in_background(lambda: take(http, org, site.url(f"/slow?ms={ms}"), timeout="40"))
    worker = isolated.processes[role_of(isolated, rendering_worker(store))]
    wait_for(lambda: len(site.requests_to("/slow")) > loading, 30, "the page to start loading")
    return loading, thread, box, worker


def test_chromium_killed_under_a_job_is_replaced_and_the_job_runs_again_unseen(
        isolated: RunningService, store: RestartableRedis, fresh_org: Org, site: Site) -> None:
    with httpx.Client(base_url=isolated.url) as http:
        loading, thread, box, worker = slow_capture_underway(http, isolated, store, fresh_org, site, 4000)
        assert kill_browsers(worker.pid), process_tree(worker.pid)
        thread.join(60)
        response = box["value"]
        # Not the target's fault, so not network_error: the job ran again on a new Chromium and succeeded.
        assert isinstance(response, httpx.Response) and response.status_code == 200, getattr(response, "text", "")
        assert response.content.startswith(b"\x89PNG")
        assert len(site.requests_to("/slow")) == loading + 2  # loaded a second time, on the new Chromium
        assert usage(http, fresh_org)["used"] == 1  # charged once
        assert worker.poll() is None, "the worker itself must survive its browser"
        for _ in range(2 * WORKERS):  # whichever worker takes them
            assert take(http, fresh_org, site.url("/colours.html")).status_code == 200
        wait_for(lambda: metric(http, "screenshot_browser_restarts_total") >= 1, 10, "the restart in /metrics")
        wait_for(lambda: metric(http, "screenshot_browser_memory_reliefs_total") >= 2 * WORKERS - 1, 10,
                 "the memory reliefs after the jobs in /metrics")


def test_chromium_killed_again_under_the_rerun_is_a_retryable_internal_error_uncharged(
        isolated: RunningService, store: RestartableRedis, fresh_org: Org, site: Site) -> None:
    with httpx.Client(base_url=isolated.url) as http:
        loading, thread, box, worker = slow_capture_underway(http, isolated, store, fresh_org, site, 8000)
        assert kill_browsers(worker.pid), process_tree(worker.pid)
        wait_for(lambda: len(site.requests_to("/slow")) > loading + 1, 30, "the job's second run to start loading")
        assert kill_browsers(worker.pid)
        thread.join(60)
        response = box["value"]
        assert isinstance(response, httpx.Response) and response.status_code == 500, getattr(response, "text", "")
        body = response.json()
        assert body["error_code"] == "internal_application_error" and "safe to retry" in body["error_message"]
        assert len(site.requests_to("/slow")) == loading + 2  # run twice, not a third time
        assert usage(http, fresh_org)["used"] == 0
        assert take(http, fresh_org, site.url("/colours.html")).status_code == 200


def test_redis_down_is_temporary_unavailable_and_the_service_recovers(
        isolated: RunningService, store: RestartableRedis, fresh_org: Org, site: Site) -> None:
    with httpx.Client(base_url=isolated.url) as http:
        store.stop()
        try:
            down = take(http, fresh_org, site.url("/colours.html"))
            assert down.status_code == 503, down.text
            assert down.json()["error_code"] == "temporary_unavailable"
            assert http.get("/readyz").status_code == 503
        finally:
            store.start()
        wait_for(lambda: http.get("/readyz").status_code == 200, 60, "readiness after Redis came back")
        wait_for(lambda: take(http, fresh_org, site.url("/colours.html")).status_code == 200, 60,
                 "a capture after Redis came back")


@pytest.mark.parametrize(("path", "codes"), [
    ("/endless-loop", {"timeout_error"}),
    ("/memory-bomb.html", {"timeout_error", "internal_application_error", "network_error"}),
    ("/huge.html", {"timeout_error", "resulting_image_too_large", "network_error"}),
    ("/loop", {"network_error", "timeout_error"}),
    ("/never-loads.html", {"timeout_error"}),
])
def test_hostile_pages_end_with_an_error_in_time_and_the_worker_stays_healthy(
        client: httpx.Client, org: Org, site: Site, path: str, codes: set[str]) -> None:
    params = {"timeout": "8", "navigation_timeout": "6"}
    if path == "/endless-loop":
        response = client.get("/v1/screenshot/take", params={
            "access_key": org.access_key, "html": "<script>while (true) {}</script>", **params})
    else:
        response = client.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": site.url(path),
                                                              **params})
    if response.status_code == 200:  # a page that renders anyway (a 100 MB text page can) is fine too
        assert response.headers["content-type"] == "image/png"
    else:
        assert response.json()["error_code"] in codes, response.text
    healthy = client.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": site.url("/colours.html"),
                                                        "viewport_width": "200", "viewport_height": "100"})
    assert healthy.status_code == 200


def test_a_worker_stopped_mid_job_finishes_it_then_exits(
        isolated: RunningService, store: RestartableRedis, fresh_org: Org, site: Site) -> None:
    with httpx.Client(base_url=isolated.url) as http:
        thread, box = in_background(lambda: take(http, fresh_org, site.url("/slow?ms=3000"), timeout="30"))
        role = role_of(isolated, rendering_worker(store))
        worker = isolated.processes[role]
        worker.send_signal(signal.SIGTERM)  # what `docker stop` and Kubernetes send
        thread.join(40)
        response = box["value"]
        assert isinstance(response, httpx.Response)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "image/png"
        assert worker.wait(30) == 0, "the worker exits by itself once its job is done"
        record = usage(http, fresh_org)
        assert record["used"] == 1 and record["concurrency"]["remaining"] == 4
        assert take(http, fresh_org, site.url("/colours.html")).status_code == 200  # the other worker
        assert usage(http, fresh_org)["used"] == 2
        isolated.restart(role)
        wait_for(lambda: http.get("/readyz").json()["workers"] >= WORKERS, 60, "the restarted worker")


def test_the_api_stopped_with_requests_in_flight_answers_them_then_exits(
        isolated: RunningService, fresh_org: Org, site: Site) -> None:
    api = isolated.processes["api"]
    with httpx.Client(base_url=isolated.url) as http:
        loading = len(site.requests_to("/slow"))
        thread, box = in_background(lambda: take(http, fresh_org, site.url("/slow?ms=3000"), timeout="30"))
        wait_for(lambda: len(site.requests_to("/slow")) > loading, 30, "the page to start loading")
        api.send_signal(signal.SIGTERM)
        thread.join(40)
        response = box["value"]
        assert isinstance(response, httpx.Response)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "image/png"
        # uvicorn re-raises the signal once it has drained, so the exit status says "stopped by SIGTERM".
        assert api.wait(30) in (0, -signal.SIGTERM)
        with pytest.raises(httpx.ConnectError):
            http.get("/healthz")
    isolated.restart("api")
    with httpx.Client(base_url=isolated.url) as http:
        wait_for(lambda: http.get("/readyz").status_code == 200, 60, "the restarted API")
        record = usage(http, fresh_org)
        assert record["used"] == 1 and record["concurrency"]["remaining"] == 4


def test_an_async_job_whose_worker_is_killed_runs_again_once_then_fails_uncharged_and_tells_its_webhook(
        isolated: RunningService, store: RestartableRedis, fresh_org: Org, site: Site) -> None:
    from tests.support.receivers import Receiver

    with Receiver() as receiver, httpx.Client(base_url=isolated.url) as http:
        def submit(ms: int) -> str:
            accepted = take(http, fresh_org, site.url(f"/slow?ms={ms}"), timeout="30", webhook_errors="true",
                            webhook_url=receiver.url("/hook"), **{"async": "true"})
            assert accepted.status_code == 202, accepted.text
            return accepted.json()["reference"]  # type: ignore[no-any-return]

        # Killed once: the job runs again on the other worker, and ends done, charged once, told once.
        reference = submit(3000)
        first = rendering_worker(store)
        os.killpg(isolated.processes[role_of(isolated, first)].pid, signal.SIGKILL)
        [delivery] = receiver.wait_for("/hook", timeout=60)
        assert delivery.headers["content-type"] == "image/png" and delivery.headers["idempotency-key"] == reference
        assert usage(http, fresh_org)["used"] == 1
        isolated.restart(role_of(isolated, first))
        wait_for(lambda: http.get("/readyz").json()["workers"] >= WORKERS, 60, "the restarted worker")
        # Killed twice (a page that kills every worker it reaches): failed, uncharged, its webhook told.
        reference = submit(8000)
        first = rendering_worker(store)
        assert usage(http, fresh_org)["concurrency"]["remaining"] == 3  # the job holds its slot
        os.killpg(isolated.processes[role_of(isolated, first)].pid, signal.SIGKILL)
        second = rendering_worker(store, other_than=first)
        os.killpg(isolated.processes[role_of(isolated, second)].pid, signal.SIGKILL)
        deliveries = receiver.wait_for("/hook", count=2, timeout=30)  # the API's sweeper, within seconds
        assert deliveries[-1].json()["error_code"] == "internal_application_error"
        assert deliveries[-1].headers["x-service-reference"] == reference
        status = http.get(f"/v1/screenshot/jobs/{reference}", params={"access_key": fresh_org.access_key}).json()
        assert status["status"] == "failed" and "stopped" in status["error_message"]
        record = usage(http, fresh_org)
        assert record["used"] == 1 and record["concurrency"]["remaining"] == 4
        assert len(receiver.to("/hook")) == 2
        for victim in (first, second):
            isolated.restart(role_of(isolated, victim))
        wait_for(lambda: http.get("/readyz").json()["workers"] >= WORKERS, 60, "the restarted workers")


def test_the_waiting_lane_drops_malformed_entries_and_answers_jobs_that_waited_past_their_deadline(
        isolated: RunningService, store: RestartableRedis, fresh_org: Org, site: Site) -> None:
    from render.contract.wire import JobResult
    from render.queue import lanes
    from render.queue.keys import LANE_GROUP, LANE_KEY, job_key, result_key
    from render.queue.records import JOB_RECORD_TTL_SECONDS
    from tests.support.jobs import waiting_job

    connection = redis.Redis.from_url(store.url)
    reply = connection.pubsub()
    reply.subscribe("results:test-lane")
    expired = waiting_job("expired-in-lane", fresh_org.id, options={"url": site.url("/")},
                          reply_channel="results:test-lane", deadline=time.time() - 1)
    offer = lanes.OFFER.on(connection)
    for reference, job in (("malformed", b"{not json"), ("malformed", b'{"reference": "no other field"}'),
                           ("malformed", b"[1, 2]"), ("", b""), (expired.reference, orjson.dumps(expired.to_json()))):
        offer(keys=[job_key(reference or "none")], args=[LANE_KEY, lanes.INTERACTIVE, fresh_org.id, 100, "sync",
                                                          reference, job, 60])
    # And in the lane's own stream, as the hand-off before it was fair left it.
    connection.xgroup_create(LANE_KEY, LANE_GROUP, id="0", mkstream=True)
    connection.xadd(LANE_KEY, {"no": "field the worker knows"})
    # Every entry leaves the lane: none waits, none stays handed to a worker.
    stream = f"{LANE_KEY}:{lanes.INTERACTIVE}:{fresh_org.id}"
    wait_for(lambda: connection.xlen(stream) == 0 == connection.xlen(LANE_KEY), 20, "the workers to take every entry")
    assert connection.xpending(LANE_KEY, LANE_GROUP)["pending"] == 0 and not connection.exists(stream)
    wait_for(lambda: connection.exists(result_key(expired.reference)), 20, "the expired job's answer")
    error = orjson.loads(connection.hget(result_key(expired.reference), "meta"))["error"]  # type: ignore[arg-type]
    assert error["error_code"] == "timeout_error" and "waited in the queue" in error["error_message"], error
    record = connection.hgetall(job_key(expired.reference))  # what GET /jobs/{reference} reads
    assert record[b"status"] == b"failed" and b"timeout_error" in record[b"error"], record
    assert 0 < connection.ttl(job_key(expired.reference)) <= JOB_RECORD_TTL_SECONDS
    assert any(message["type"] == "message" and JobResult.from_message(message["data"])[0] == "expired-in-lane"
               for message in iter(lambda: reply.get_message(timeout=1), None))
    with httpx.Client(base_url=isolated.url) as http:
        for _ in range(WORKERS * 2):  # every worker still serves
            response = take(http, fresh_org, site.url("/colours.html"))
            assert response.status_code == 200, response.text
            assert response.content.startswith(b"\x89PNG")
