"""Health, readiness, metrics and docs."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import redis

from render.queue.redis_client import RedisTarget
from render.worker.main import worker_connection
from service.deliverer.main import deliverer_connection
from service.settings import default_workers
from tests.conftest import Org
from tests.support.site import Site

pytestmark = pytest.mark.browser
IDLE_WAIT_SECONDS = 7  # beyond redis-py's default socket timeout (5 s)


def test_health_and_readiness(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["redis"] is True and ready.json()["workers"] >= 1


def test_metrics_count_requests_by_route_and_code(client: httpx.Client, org: Org, site: Site) -> None:
    client.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": site.url("/colours.html"),
                                               "response_type": "empty"})
    client.get("/v1/screenshot/take", params={"url": site.url("/colours.html")})
    text = client.get("/metrics").text
    assert 'screenshot_requests_total{code="ok",route="/v1/screenshot/take"}' in text
    assert 'screenshot_requests_total{code="access_key_required",route="/v1/screenshot/take"}' in text
    assert "screenshot_render_seconds_bucket" in text
    assert "screenshot_queue_depth" in text
    assert org.access_key not in text
    assert [line for line in text.splitlines() if "_created" in line] == []  # no creation-time series


def gauges(client: httpx.Client) -> dict[str, float]:
    """The gauges a scaler reads, as /metrics exports them now."""
    wanted = ("screenshot_queue_depth ", 'screenshot_workers{state="busy"} ', 'screenshot_workers{state="idle"} ',
              "screenshot_captures_in_flight ")
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in client.get("/metrics").text.splitlines()
            if line.startswith(wanted)}


def test_metrics_show_busy_workers_in_flight_captures_and_the_queue_as_it_is(
        client: httpx.Client, make_org: Callable[..., Org], site: Site) -> None:
    workers = default_workers()
    idle = {"screenshot_queue_depth": 0.0, 'screenshot_workers{state="busy"}': 0.0,
            'screenshot_workers{state="idle"}': float(workers), "screenshot_captures_in_flight": 0.0}
    # Earlier checks' jobs may still be finishing (the busy flag clears at the next heartbeat, within 1 s).
    assert poll(lambda: gauges(client), idle) == idle
    org = make_org(concurrency=workers + 1)
    # A page that answers after 4 s: quick captures (a `delay` would make them heavy, and heavy ones leave a worker
    # free while quick ones come: render.queue.lane_scripts), so every worker takes one.
    slow = {"access_key": org.access_key, "url": site.url("/slow?ms=4000"), "response_type": "empty"}
    with ThreadPoolExecutor(workers + 1) as pool:
        answers = [pool.submit(client.get, "/v1/screenshot/take", params=slow, timeout=60)
                   for _ in range(workers + 1)]
        busy = {"screenshot_queue_depth": 1.0, 'screenshot_workers{state="busy"}': float(workers),
                'screenshot_workers{state="idle"}': 0.0, "screenshot_captures_in_flight": float(workers + 1)}
        seen = poll(lambda: gauges(client), busy)
        assert seen == busy  # every worker rendering, one capture waiting: what a scaler must see
        assert all(answer.result().status_code == 200 for answer in answers)
    assert poll(lambda: gauges(client), idle) == idle
    if workers < 2:
        return
    # Heavy captures (a delay) just after quick ones: they leave the interactive reserve free (a quarter of the
    # workers, one at least, never all), so one of them waits although a worker is idle.
    reserve = min(max(1, int(workers * 0.25)), workers - 1)
    heavy = {**slow, "url": site.url("/colours.html"), "delay": "3"}
    # The reserve holds while quick captures came within the lane's window (INTERACTIVE_WINDOW_MS); the last one above
    # was offered before two 4 s pages, so one more now keeps the window open whatever this machine's pace.
    quick = {**slow, "url": site.url("/colours.html")}
    assert client.get("/v1/screenshot/take", params=quick, timeout=60).status_code == 200
    with ThreadPoolExecutor(workers) as pool:
        answers = [pool.submit(client.get, "/v1/screenshot/take", params=heavy, timeout=60) for _ in range(workers)]
        held = {"screenshot_queue_depth": float(reserve), 'screenshot_workers{state="busy"}': float(workers - reserve),
                'screenshot_workers{state="idle"}': float(reserve), "screenshot_captures_in_flight": float(workers)}
        assert poll(lambda: gauges(client), held) == held
        assert all(answer.result().status_code == 200 for answer in answers)


def poll(read: Callable[[], dict[str, float]], wanted: dict[str, float], seconds: float = 20) -> dict[str, float]:
    """`read()` until it gives `wanted` (or the last reading after `seconds`)."""
    deadline = time.monotonic() + seconds
    seen = read()
    while seen != wanted and time.monotonic() < deadline:
        time.sleep(0.1)
        seen = read()
    return seen


def test_unknown_routes_and_methods_answer_with_the_error_body(client: httpx.Client) -> None:
    missing = client.get("/v1/screenshot/nothing-here")
    assert missing.status_code == 404
    assert missing.json()["error_code"] == "request_not_valid"
    assert "/v1/screenshot/nothing-here" in missing.json()["error_message"]
    newline = client.get("/v1/screenshot/files/a%0Ab")  # no route matches a key holding a newline
    assert newline.status_code == 404 and newline.json()["is_successful"] is False
    wrong = client.delete("/v1/screenshot/take")
    assert wrong.status_code == 405
    assert wrong.json()["error_code"] == "request_not_valid" and "DELETE" in wrong.json()["error_message"]
    # RFC 9110: a 405 names what the path allows, over all of its routes.
    assert wrong.headers["allow"] == "GET, POST"
    assert client.request("TRACE", "/healthz").headers["allow"] == "GET"
    monitor = client.put("/v1/monitors/m1")
    assert monitor.status_code == 405 and monitor.headers["allow"] == "DELETE, GET, PATCH"


@pytest.mark.parametrize("connect", [worker_connection, deliverer_connection], ids=["worker", "deliverer"])
def test_idle_workers_keep_their_redis_connection(redis_url: str,
                                                  connect: Callable[[RedisTarget], redis.Redis]) -> None:
    """A worker waiting for jobs blocks on Redis for up to 30 s (RQ's dequeue: 45 s). On redis-py's default
    5 s socket timeout that wait broke off, and an idle worker logged "lost Redis" every few seconds."""
    connection = connect(RedisTarget(redis_url))
    try:
        connection.ping()  # the first connection, opened before RQ adjusts the pool (the runtime's)
        assert connection.blpop(["test:idle-lane"], IDLE_WAIT_SECONDS) is None
    finally:
        connection.close()
