"""servers_region (an SDK parameter): workers an operator labels by region (SCREENSHOT_REGIONS,
SCREENSHOT_WORKER_REGIONS) take only their region's jobs and any job that names none; an unknown region is
refused naming the known ones. Which worker rendered a job is read from its record in Redis."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import redis

from render.queue.keys import job_key
from tests.conftest import Org, create_org
from tests.support.servers import RunningService, running_service, start, stop, wait_for
from tests.support.site import Site

pytestmark = pytest.mark.browser


@dataclass
class Regions:
    service: RunningService
    org: Org
    pids: dict[str, int]  # region -> its worker's process id


@pytest.fixture(scope="module")
def regions(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Regions]:
    """One API offering eu-west and us-east; a worker labelled eu-west (the service's own) and one us-east."""
    with running_service(redis_url.rsplit("/", 1)[0] + "/8", tmp_path_factory.mktemp("regions"), workers=1,
                         SCREENSHOT_REGIONS="eu-west,us-east", SCREENSHOT_WORKER_REGIONS="eu-west") as service:
        us_worker = start("worker", {**service.env, "SCREENSHOT_WORKER_REGIONS": "us-east"})
        try:
            wait_for(lambda: httpx.get(f"{service.url}/readyz").json()["workers"] >= 2, 60, "the us-east worker")
            org = asyncio.run(create_org(service.redis_url, quota=1000, concurrency=4))
            yield Regions(service, org, {"eu-west": service.processes["worker0"].pid, "us-east": us_worker.pid})
        finally:
            stop([us_worker])


def rendered_by(regions: Regions, reference: str) -> str:
    """The region of the worker that took the job."""
    connection = redis.Redis.from_url(regions.service.redis_url)
    try:
        worker = connection.hget(job_key(reference), "worker")
    finally:
        connection.close()
    assert worker, f"job {reference} has no worker recorded"
    pid = int(worker.decode().split(".")[-2])
    return next(region for region, region_pid in regions.pids.items() if region_pid == pid)


def take(regions: Regions, site: Site, **params: str) -> httpx.Response:
    return httpx.get(f"{regions.service.url}/v1/screenshot/take", timeout=60, params={
        "access_key": regions.org.access_key, "url": site.url("/colours.html"), "viewport_width": "200",
        "viewport_height": "100", **params})


def test_a_region_is_served_only_by_its_workers(regions: Regions, site: Site) -> None:
    for region in ("us-east", "eu-west", "us-east", "eu-west", "us-east"):
        response = take(regions, site, servers_region=region)
        assert response.status_code == 200 and response.content.startswith(b"\x89PNG"), response.text
        assert rendered_by(regions, response.headers["x-service-reference"]) == region
    # Without a region, any worker.
    anywhere = take(regions, site)
    assert anywhere.status_code == 200
    assert rendered_by(regions, anywhere.headers["x-service-reference"]) in regions.pids


def test_an_async_job_waits_for_its_region(regions: Regions, site: Site) -> None:
    accepted = take(regions, site, servers_region="us-east", **{"async": "true"})
    assert accepted.status_code == 202, accepted.text
    reference = accepted.json()["reference"]
    deadline = time.monotonic() + 60
    while httpx.get(f"{regions.service.url}/v1/screenshot/jobs/{reference}",
                    params={"access_key": regions.org.access_key}).json()["status"] != "done":
        assert time.monotonic() < deadline, "the async job never finished"
        time.sleep(0.2)
    assert rendered_by(regions, reference) == "us-east"


@pytest.mark.parametrize("value, message", [
    ("ap-south", "unknown region; available: eu-west, us-east"),
    ("US East", "String should match pattern"),
])
def test_an_unknown_region_is_refused_naming_the_known_ones(regions: Regions, site: Site, value: str,
                                                            message: str) -> None:
    refused = take(regions, site, servers_region=value)
    assert refused.status_code == 400 and refused.json()["error_code"] == "request_not_valid"
    detail = refused.json()["error_details"][0]
    assert detail["field"] == "servers_region" and detail["message"].startswith(message), detail
    bulk = httpx.post(f"{regions.service.url}/v1/screenshot/bulk", timeout=60, json={
        "access_key": regions.org.access_key, "execute": True,
        "requests": [{"url": site.url("/colours.html"), "servers_region": value}]})
    if message.startswith("String should match"):  # the schema's own pattern: the whole bulk is refused
        assert bulk.status_code == 400, bulk.text
        assert bulk.json()["error_details"][0]["field"] == "requests.0.servers_region"
        return
    assert bulk.status_code == 200, bulk.text
    item = bulk.json()[0]["response"]  # what the schema cannot say (which regions run): in the entry's place
    assert item["status"] == 400 and not item["is_successful"]
    assert json.loads(base64.b64decode(item["body"]))["error_details"][0]["field"] == "servers_region"
