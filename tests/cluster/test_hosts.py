"""The service across hosts that share nothing but Redis and S3.

Each host is a network namespace on a subnet of the test's own (tests/cluster/network.py), with no route
out: `store` runs redis-server (TLS with a CA the test makes, an ACL user with a password, the default user
off) and moto's S3 server; `api` two API processes; `worker1` and `worker2` one render worker each (labelled
eu-west and us-east); `webhooks` the deliverer; `site` the target site and a webhook receiver. No process
shares a directory with another (each its own SCREENSHOT_DATA_DIR; results only in the bucket), and the
test itself is the clients, at the subnet's first address.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx
import pytest
import redis

from render.queue.keys import job_key
from render.queue.redis_client import RedisTarget, close
from tests.cluster.network import Host, Network, available, inside, network
from tests.conftest import Org, create_org
from tests.support.images import decode, near, rgb_at
from tests.support.receivers import Receiver
from tests.support.servers import S3_ENV, S3Server, service_env, wait_for
from tests.support.site import Site
from tests.support.tls import Authority

pytestmark = pytest.mark.browser

HOSTS = ["store", "api", "worker1", "worker2", "webhooks", "site"]
REGIONS = {"worker1": "eu-west", "worker2": "us-east"}
REDIS_PORT = 6380
S3_PORT = 9000
API_PORTS = (8000, 8001)


@dataclass
class Cluster:
    net: Network
    redis_url: str  # rediss:// as the ACL user, trusting the test's CA
    apis: list[str]  # both API processes' base URLs
    site: Site
    receiver: Receiver
    s3: S3Server
    org: Org
    logs: Path
    charged: int = 0  # successful captures so far: what /usage must say
    workers: dict[str, int] = field(default_factory=dict)  # host -> its worker's process id
    client: redis.Redis | None = None

    def host(self, name: str) -> Host:
        return self.net.hosts[name]

    def redis(self) -> redis.Redis:
        """The test's own client (one, closed with the cluster: a socket left to the collector would warn)."""
        if self.client is None:
            self.client = RedisTarget(self.redis_url).sync()
        return self.client

    def take(self, api: int, **params: str) -> httpx.Response:
        return httpx.get(f"{self.apis[api]}/v1/screenshot/take", timeout=120, params={
            "access_key": self.org.access_key, "url": self.site.url("/colours.html"), "viewport_width": "200",
            "viewport_height": "100", **params})

    def usage(self, api: int) -> dict:  # type: ignore[type-arg]
        return httpx.get(f"{self.apis[api]}/v1/screenshot/usage",  # type: ignore[no-any-return]
                         params={"access_key": self.org.access_key}, timeout=30).json()

    def worker_host_of(self, reference: str) -> str:
        """The host whose worker took the job (from its record in Redis)."""
        worker = self.redis().hget(job_key(reference), "worker")
        assert worker, f"job {reference} has no worker recorded"
        pid = int(worker.decode().split(".")[-2])
        return next(host for host, worker_pid in self.workers.items() if worker_pid == pid)

    def ready_workers(self, api: int = 0) -> int:
        return int(httpx.get(f"{self.apis[api]}/readyz", timeout=10).json()["workers"])


def colours_ok(png: bytes) -> bool:
    image = decode(png)
    return ((image.width, image.height) == (200, 100) and near(rgb_at(image, 100, 20), (255, 0, 0))
            and near(rgb_at(image, 100, 80), (0, 0, 255)))


def _start_store(store: Host, directory: Path, authority: Authority, password: str, log: IO[bytes]) -> None:
    store.start(["redis-server", "--bind", store.address, "--port", "0", "--tls-port", str(REDIS_PORT),
                 "--tls-cert-file", str(authority.chain_file), "--tls-key-file", str(authority.chain_file),
                 "--tls-ca-cert-file", str(authority.ca_file), "--tls-auth-clients", "no",
                 "--user", "default", "off", "--user", "screenshot", "on", f">{password}", "~*", "&*", "+@all",
                 "--dir", str(directory), "--save", "", "--appendonly", "no", "--loglevel", "warning"], log=log)
    store.start([sys.executable, "-m", "moto.server", "-H", store.address, "-p", str(S3_PORT)],
                env={**_plain_env(), **S3_ENV}, log=log)


def _plain_env() -> dict[str, str]:
    return {key: value for key, value in service_env("", Path(), 0).items() if not key.startswith("SCREENSHOT_")}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    why = available()
    if why:
        pytest.skip(f"the multi-host test needs Linux network namespaces: {why}")
    directory = tmp_path_factory.mktemp("cluster")
    os.environ.update(S3_ENV)  # the test's own S3 client (never AWS: the endpoint is the store host)
    with network(HOSTS) as net, contextlib.ExitStack() as stack, (directory / "cluster.log").open("wb") as log:
        store = net.hosts["store"]
        authority = Authority(directory, ["redis.cluster.test"], (store.address,))
        password = secrets.token_hex(16)
        (directory / "redis").mkdir()
        _start_store(store, directory / "redis", authority, password, log)
        redis_url = (f"rediss://screenshot:{password}@{store.address}:{REDIS_PORT}/0"
                     f"?ssl_ca_certs={authority.ca_file}")
        s3 = S3Server(f"http://{store.address}:{S3_PORT}")
        wait_for(lambda: _ping(RedisTarget(redis_url)), 30, "Redis on the store host")
        wait_for(lambda: httpx.get(f"{s3.url}/moto-api/").status_code == 200, 30, "S3 on the store host")
        bucket = s3.new_bucket()

        site_host = net.hosts["site"]
        with inside(site_host):  # their listening sockets on the site host
            site, receiver = Site(host=site_host.address), Receiver(host=site_host.address)
        stack.enter_context(site)
        stack.enter_context(receiver)

        def env(role: str, **extra: str) -> dict[str, str]:
            own = directory / role
            own.mkdir()
            return service_env(redis_url, own, API_PORTS[0], **s3.service_env(bucket),
                               SCREENSHOT_REGIONS=",".join(REGIONS.values()), **extra)

        api = net.hosts["api"]
        for number, port in enumerate(API_PORTS):
            api.start(_role("api"), env(f"api{number}", SCREENSHOT_HOST=api.address, SCREENSHOT_PORT=str(port)), log)
        workers = {name: net.hosts[name].start(_role("worker"), env(name, SCREENSHOT_WORKER_REGIONS=region), log)
                   for name, region in REGIONS.items()}
        net.hosts["webhooks"].start(_role("webhooks"), env("webhooks"), log)
        apis = [f"http://{api.address}:{port}" for port in API_PORTS]
        for url in apis:
            wait_for(lambda url=url: httpx.get(f"{url}/readyz").json()["workers"] >= 2, 90, "the APIs and workers")
        org = asyncio.run(create_org(redis_url, quota=1000, concurrency=4))
        made = Cluster(net, redis_url, apis, site, receiver, s3, org, directory,
                       workers={name: process.pid for name, process in workers.items()})
        try:
            yield made
        finally:
            if made.client is not None:
                close(made.client)


def _role(role: str) -> list[str]:
    return [sys.executable, "-m", "service.cli", role]


def test_hosts_share_nothing_but_the_network(cluster: Cluster) -> None:
    """The set-up itself: no route off the subnet, and Redis refuses anyone without the user and TLS."""
    store = cluster.host("store").address
    for host in HOSTS:
        outside = subprocess.run(cluster.host(host).command(["ip", "route", "get", "1.1.1.1"]), capture_output=True,
                                 text=True, timeout=10)
        assert outside.returncode != 0 and "unreachable" in outside.stderr, outside.stdout
    with pytest.raises(redis.ConnectionError), redis.Redis(host=store, port=REDIS_PORT, socket_timeout=3,
                                                           retry=None) as plain:
        plain.ping()  # no TLS
    anonymous = cluster.redis_url.replace(cluster.redis_url.split("@")[0] + "@", "rediss://")
    with pytest.raises(redis.AuthenticationError):
        _ping(RedisTarget(anonymous))  # the default user is off
    with pytest.raises(redis.AuthenticationError):
        _ping(RedisTarget(cluster.redis_url.replace("screenshot:", "screenshot:x")))


def _ping(target: RedisTarget) -> bool:
    with target.sync() as client:
        return bool(client.ping())


def test_a_capture_is_cached_for_every_api_and_stored_only_in_the_bucket(cluster: Cluster) -> None:
    page = secrets.token_hex(4)
    renders = len(cluster.site.requests_to("/colours.html"))
    first = cluster.take(0, cache="true", cache_key=page)
    assert first.status_code == 200, first.text
    assert colours_ok(first.content)
    cluster.charged += 1
    again = cluster.take(1, cache="true", cache_key=page)  # the other API: a hit, read from S3
    assert again.status_code == 200, again.text
    assert again.content == first.content and again.headers["x-service-rendering-seconds"] == "0.000"
    assert httpx.get(again.headers["x-service-cache-url"], timeout=30).content == first.content
    assert len(cluster.site.requests_to("/colours.html")) == renders + 1  # rendered once, on one worker host
    for role in ("api0", "api1", "worker1", "worker2", "webhooks"):  # nothing of the result on any disk
        stored = [path for path in (cluster.logs / role).rglob("*") if path.is_file() and path.suffix == ".png"]
        assert stored == [], f"{role} kept {stored}"
    assert cluster.usage(1)["used"] == cluster.charged


def test_an_async_job_reaches_its_webhook_and_either_api_knows_it(cluster: Cluster) -> None:
    accepted = cluster.take(1, **{"async": "true", "webhook_url": cluster.receiver.url("/hook"),
                                  "external_identifier": "multi-host"})
    assert accepted.status_code == 202, accepted.text
    reference = accepted.json()["reference"]
    [delivery] = cluster.receiver.wait_for("/hook")
    expected = hmac.new(cluster.org.signing_key.encode(), delivery.body, hashlib.sha256).hexdigest()
    assert delivery.headers["x-service-signature"] == expected and delivery.headers["x-service-reference"] == reference
    assert colours_ok(delivery.body)
    cluster.charged += 1
    for api in (0, 1):
        body = _job_status(cluster, api, reference, {"done"})
        assert httpx.get(body["screenshot_url"], timeout=30).content == delivery.body
    assert not cluster.redis().hexists(job_key(reference), "payload"), "the request is not kept for 7 days"
    assert cluster.usage(0)["used"] == cluster.charged


def _job_status(cluster: Cluster, api: int, reference: str, wanted: set[str]) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        body = httpx.get(f"{cluster.apis[api]}/v1/screenshot/jobs/{reference}", timeout=30,
                         params={"access_key": cluster.org.access_key}).json()
        if body["status"] in wanted:
            return body  # type: ignore[no-any-return]
        time.sleep(0.2)
    raise TimeoutError(f"job {reference} never reached {wanted} on API {api}")


def test_bulk_runs_across_the_workers(cluster: Cluster) -> None:
    response = httpx.post(f"{cluster.apis[0]}/v1/screenshot/bulk", timeout=120, json={
        "access_key": cluster.org.access_key, "execute": True,
        "options": {"viewport_width": 200, "viewport_height": 100},
        "requests": [{"url": cluster.site.url("/colours.html")}, {"url": cluster.site.url("/colours.html?b")}]})
    assert response.status_code == 200, response.text
    for entry in response.json():
        assert entry["response"]["status"] == 200
        assert colours_ok(base64.b64decode(entry["response"]["body"]))
    cluster.charged += 2
    assert cluster.usage(1)["used"] == cluster.charged


def test_a_region_s_jobs_reach_only_that_region_s_host(cluster: Cluster) -> None:
    for host, region in REGIONS.items():
        for _ in range(2):
            response = cluster.take(0, servers_region=region)
            assert response.status_code == 200, response.text
            cluster.charged += 1
            assert cluster.worker_host_of(response.headers["x-service-reference"]) == host
    assert cluster.usage(0)["used"] == cluster.charged


def test_a_worker_host_whose_link_goes_down_and_up_serves_again_by_itself(cluster: Cluster) -> None:
    worker1 = cluster.host("worker1")
    worker1.link(False)
    try:
        # Redis hands the next job to the worker that has waited longest: worker1, whose connection is gone
        # without Redis knowing. Whichever job that is, it must be offered again and served by worker2.
        accepted = cluster.take(1, **{"async": "true", "webhook_url": cluster.receiver.url("/while-cut-off")})
        assert accepted.status_code == 202, accepted.text
        served = cluster.take(0)
        assert served.status_code == 200, served.text
        assert colours_ok(served.content)
        [delivery] = cluster.receiver.wait_for("/while-cut-off", timeout=60)
        assert colours_ok(delivery.body)
        cluster.charged += 2
    finally:
        worker1.link(True)
    # worker1 finds Redis again by itself: with worker2 cut off in turn, it alone takes the next capture.
    wait_for(lambda: cluster.ready_workers() >= 2, 90, "worker1 back")
    worker2 = cluster.host("worker2")
    worker2.link(False)
    try:
        response = cluster.take(1)
        assert response.status_code == 200, response.text
        cluster.charged += 1
        assert cluster.worker_host_of(response.headers["x-service-reference"]) == "worker1"
    finally:
        worker2.link(True)
    wait_for(lambda: cluster.ready_workers() >= 2, 90, "worker2 back")
    assert cluster.usage(1)["used"] == cluster.charged
    assert cluster.usage(1)["concurrency"]["remaining"] == 4


def test_a_worker_host_that_dies_mid_job_is_a_clear_error_uncharged_and_the_other_serves(cluster: Cluster) -> None:
    answer: dict[str, httpx.Response] = {}
    request = threading.Thread(target=lambda: answer.setdefault(
        "response", cluster.take(0, url=cluster.site.url("/slow?ms=8000"), timeout="30")))
    request.start()
    victim = _rendering_host(cluster)
    cluster.host(victim).crash()  # the worker, its Chromium, everything on that host
    request.join(60)
    response = answer["response"]
    assert response.status_code == 500, response.text
    assert response.json()["error_code"] == "internal_application_error"
    assert "stopped" in response.json()["error_message"]
    assert cluster.usage(1)["used"] == cluster.charged and cluster.usage(1)["concurrency"]["remaining"] == 4
    survivor = cluster.take(1)
    assert survivor.status_code == 200 and colours_ok(survivor.content)
    cluster.charged += 1
    assert cluster.worker_host_of(survivor.headers["x-service-reference"]) != victim
    assert cluster.usage(0)["used"] == cluster.charged


def _rendering_host(cluster: Cluster) -> str:
    connection = cluster.redis()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for key in connection.scan_iter("job:*"):
            record = connection.hgetall(key)
            if record.get(b"status") == b"rendering" and record.get(b"worker"):
                pid = int(record[b"worker"].decode().split(".")[-2])
                return next(host for host, worker_pid in cluster.workers.items() if worker_pid == pid)
        time.sleep(0.05)
    raise TimeoutError("no job started rendering")


