"""Health, readiness, metrics and docs."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
import redis

from render.worker import worker_connection
from service.webhooks import deliverer_connection
from tests.conftest import Org
from tests.site import Site

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


@pytest.mark.parametrize("connect", [worker_connection, deliverer_connection], ids=["worker", "deliverer"])
def test_idle_workers_keep_their_redis_connection(redis_url: str, connect: Callable[[str], redis.Redis]) -> None:
    """A worker waiting for jobs blocks on Redis for up to 30 s (RQ's dequeue: 45 s). On redis-py's default
    5 s socket timeout that wait broke off, and an idle worker logged "lost Redis" every few seconds."""
    connection = connect(redis_url)
    try:
        connection.ping()  # the first connection, opened before RQ adjusts the pool (the runtime's)
        assert connection.blpop(["test:idle-lane"], IDLE_WAIT_SECONDS) is None
    finally:
        connection.close()
