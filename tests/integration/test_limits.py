"""Quota, concurrency, body size and waiting load, through the HTTP API."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

from tests.conftest import Org, RunningService
from tests.support.site import Site

pytestmark = pytest.mark.browser


def usage(client: httpx.Client, org: Org) -> dict:
    response = client.get("/v1/screenshot/usage", params={"access_key": org.access_key})
    assert response.status_code == 200
    return dict(response.json())


def take(client: httpx.Client, org: Org, **params: object) -> httpx.Response:
    return client.get("/v1/screenshot/take", params={"access_key": org.access_key, **params})


def test_usage_record_shape(client: httpx.Client, make_org) -> None:  # type: ignore[no-untyped-def]
    org = make_org(quota=7, concurrency=3)
    before = time.time_ns()
    record = usage(client, org)
    assert record["total"] == 7 and record["available"] == 7 and record["used"] == 0
    assert record["concurrency"]["limit"] == 3 and record["concurrency"]["remaining"] == 3
    assert record["concurrency"]["reset"] >= before


def test_quota_is_reached_after_successes_only(client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    org = make_org(quota=2)
    url = site.url("/colours.html")
    assert take(client, org, url=url, response_type="empty").status_code == 200
    assert take(client, org, url=site.url("/status?code=500")).json()["error_code"] == "host_returned_error"
    assert take(client, org, url=url, viewport_width="0").json()["error_code"] == "request_not_valid"
    assert usage(client, org)["used"] == 1
    assert take(client, org, url=url, response_type="empty").status_code == 200
    refused = take(client, org, url=url)
    assert refused.status_code == 400 and refused.json()["error_code"] == "screenshots_limit_reached"
    assert usage(client, org) | {"concurrency": None} == {"total": 2, "available": 0, "used": 2, "concurrency": None}


def test_concurrency_limit_is_immediate_and_the_slot_is_freed(client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    org = make_org(concurrency=1)
    slow: dict[str, httpx.Response] = {}
    thread = threading.Thread(target=lambda: slow.update(r=take(
        client, org, url=site.url("/colours.html"), delay="2", response_type="empty")))
    thread.start()
    deadline = time.monotonic() + 10
    while usage(client, org)["concurrency"]["remaining"] != 0:
        assert time.monotonic() < deadline, "the slow request never took its slot"
        time.sleep(0.05)
    record = usage(client, org)
    assert record["concurrency"]["reset"] > time.time_ns()  # the held slot frees in the future
    refused = take(client, org, url=site.url("/colours.html"))
    assert refused.status_code == 400 and refused.json()["error_code"] == "concurrency_limit_reached"
    thread.join(30)
    assert slow["r"].status_code == 200
    assert usage(client, org)["concurrency"]["remaining"] == 1
    assert usage(client, org)["used"] == 1


def test_failures_free_their_slot(client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    org = make_org(concurrency=1)
    for _ in range(3):
        assert take(client, org, url=site.url("/status?code=500")).json()["error_code"] == "host_returned_error"
    assert usage(client, org)["concurrency"]["remaining"] == 1


def test_body_too_large(client: httpx.Client, org: Org) -> None:
    big = {"html": "x" * 70_000, "access_key": org.access_key}  # the test service allows 64 KiB
    response = client.post("/v1/screenshot/take", json=big)
    assert response.status_code == 413
    assert response.json()["error_code"] == "request_body_too_large"
    assert "SCREENSHOT_MAX_BODY_BYTES" in response.json()["error_message"]

    def chunks():  # no Content-Length: the limit holds while streaming too
        for _ in range(20):
            yield b" " * 8192

    streamed = client.post("/v1/screenshot/take", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413 and streamed.json()["error_code"] == "request_body_too_large"


def test_two_hundred_requests_wait_at_once(service: RunningService, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    """The API keeps serving while 200 captures wait for the workers."""
    org = make_org(concurrency=250)
    html = "<html><body style='background:#123456'></body></html>"

    async def main() -> tuple[list[int], int]:
        limits = httpx.Limits(max_connections=300)
        async with httpx.AsyncClient(base_url=service.url, timeout=180, limits=limits) as http:
            async def one() -> int:
                response = await http.get("/v1/screenshot/take", params={
                    "access_key": org.access_key, "html": html, "viewport_width": "64", "viewport_height": "64",
                    # The last of 200 queued jobs waits for the 199 before it: give it the longest timeout.
                    "timeout": "90"})
                return response.status_code

            tasks = [asyncio.create_task(one()) for _ in range(200)]
            health_while_waiting = 0
            while not all(t.done() for t in tasks):
                if (await http.get("/healthz")).status_code == 200 and not all(t.done() for t in tasks):
                    health_while_waiting += 1
                await asyncio.sleep(0.2)
            return [t.result() for t in tasks], health_while_waiting

    statuses, health_checks = asyncio.run(main())
    assert statuses == [200] * 200
    assert health_checks > 0
    with httpx.Client(base_url=service.url) as client:
        assert usage(client, org)["used"] == 200
        assert usage(client, org)["concurrency"]["remaining"] == 250
