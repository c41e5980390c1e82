"""Redis Sentinel failover under load.

A primary, two replicas and three sentinels (Debian's redis-sentinel) on loopback, each Redis with a
password, AOF (`appendfsync everysec`) and `min-replicas-to-write 1`: the settings deploy/ carries. The
service finds the primary through the sentinels (SCREENSHOT_REDIS_SENTINELS). Under a steady load of
synchronous captures and async jobs with webhooks, the primary is killed (SIGKILL): the sentinels promote a
replica and the service follows by itself. When the load ends, every synchronous answer is a capture or a
documented retryable error, captures resumed within RECOVERY_MARGIN_SECONDS of the promotion, every async job
accepted is done (none lost, none failed) and told its webhook once, `/usage` counts exactly the captures
delivered, and every concurrency slot is free.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import redis

from render.queue.keys import job_key
from render.queue.redis_client import RedisTarget, aclose, close
from service.organisations import OrganisationStore
from service.quota import FREE_LATER_MOST_SECONDS
from tests.conftest import Org
from tests.support.images import decode
from tests.support.receivers import Received, Receiver
from tests.support.servers import RunningService, free_port, running_service, wait_for
from tests.support.site import Site

pytestmark = pytest.mark.browser

MASTER = "screenshots"
PASSWORD = "failover-test-password"
DOWN_AFTER_MS = 1000
CLIENTS = 3
CONCURRENCY = 10
# What the spec calls safe to retry: a request that met the failover gets one of these, or its capture.
RETRYABLE = {"temporary_unavailable", "internal_application_error"}
# Sentinels promote a replica after down-after-milliseconds plus an election (2.3-2.4 s here); every role finds
# it on its next retry of the lost connection (backing off to 0.5 s), a waiting request on its next poll (1 s).
RECOVERY_MARGIN_SECONDS = 5.0


def redis_settings(port: int, directory: Path) -> list[str]:
    """What deploy/ sets on every Redis of a Sentinel deployment (docs/operating.md, Redis in production)."""
    return ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory), "--requirepass", PASSWORD,
            "--masterauth", PASSWORD, "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
            "--min-replicas-to-write", "1", "--min-replicas-max-lag", "10", "--loglevel", "warning",
            "--repl-diskless-sync-delay", "0"]  # the test's replicas sync at once (deploy/ keeps Redis's 5 s)


def sentinel_config(port: int, primary: int) -> str:
    return "\n".join([
        f"port {port}", "bind 127.0.0.1",
        f"sentinel monitor {MASTER} 127.0.0.1 {primary} 2",
        f"sentinel auth-pass {MASTER} {PASSWORD}",
        f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}",
        f"sentinel failover-timeout {MASTER} 10000",
        f"sentinel parallel-syncs {MASTER} 1", ""])


@dataclass
class Deployment:
    redis: dict[int, subprocess.Popen[bytes]]  # by port; the first is the primary at the start
    sentinels: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def addresses(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.sentinels)

    def primary(self) -> int:
        """The primary's port, as the sentinels see it now."""
        with redis.Redis(port=next(iter(self.sentinels)), socket_timeout=2) as sentinel:
            return int(sentinel.sentinel_get_master_addr_by_name(MASTER)[1])

    def target(self) -> RedisTarget:
        return RedisTarget(f"redis://:{PASSWORD}@{MASTER}/0",
                           tuple(("127.0.0.1", port) for port in self.sentinels), MASTER)


def _settled(deployment: Deployment) -> bool:
    for port in deployment.sentinels:
        with redis.Redis(port=port, socket_timeout=2) as sentinel:
            state = sentinel.sentinel_master(MASTER)
        if state["num-slaves"] < 2 or state["num-other-sentinels"] < 2:
            return False
    return True


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    directory = tmp_path_factory.mktemp("sentinel")
    ports = [free_port() for _ in range(3)]
    made = Deployment({})
    try:
        for number, port in enumerate(ports):
            (directory / str(port)).mkdir()
            replica = ["--replicaof", "127.0.0.1", str(ports[0])] if number else []
            made.redis[port] = subprocess.Popen(["redis-server", *redis_settings(port, directory / str(port)),
                                                 *replica], stdout=subprocess.DEVNULL)
        with redis.Redis(port=ports[0], password=PASSWORD, socket_timeout=2) as primary:
            wait_for(lambda: primary.info("replication")["min_slaves_good_slaves"] == 2, 30, "both replicas in sync")
        for _ in range(3):
            port = free_port()
            config = directory / f"sentinel-{port}.conf"  # a sentinel rewrites its own file
            config.write_text(sentinel_config(port, ports[0]))
            made.sentinels[port] = subprocess.Popen(["redis-sentinel", str(config)], stdout=subprocess.DEVNULL)
        wait_for(lambda: _settled(made), 60, "three sentinels that know both replicas and each other")
        yield made
    finally:
        for process in [*made.sentinels.values(), *made.redis.values()]:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait(10)


@pytest.fixture(scope="module")
def service(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    directory = tmp_path_factory.mktemp("failover-service")
    with (directory / "service.log").open("wb") as log, running_service(
            deployment.target().url, directory, workers=1, log=log, SCREENSHOT_REDIS_SENTINELS=deployment.addresses,
            SCREENSHOT_REDIS_MASTER_NAME=MASTER, SCREENSHOT_RESULT_WAIT_GRACE="2") as running:
        yield running


@pytest.fixture(scope="module")
def org(deployment: Deployment) -> Org:
    async def create() -> Org:
        connection = deployment.target().asyncio()
        try:
            made = await OrganisationStore(connection).create("failover", quota=10_000, concurrency=CONCURRENCY)
        finally:
            await aclose(connection)
        return Org(made.organisation.id, made.access_key, made.organisation.signing_key or "")

    return asyncio.run(create())


@dataclass
class Load:
    """What the clients saw: synchronous outcomes and the async jobs accepted."""

    captured: int = 0  # synchronous captures answered with an image
    refused: dict[str, int] = field(default_factory=dict)  # documented errors by code
    accepted: list[str] = field(default_factory=list)  # async references
    after_kill: int = 0  # captures answered after the primary died
    lock: threading.Lock = field(default_factory=threading.Lock)


def _client(http: httpx.Client, org: Org, site: Site, receiver: Receiver, load: Load, stop: threading.Event,
            killed: threading.Event) -> None:
    turn = 0
    while not stop.is_set():
        turn += 1
        params = {"access_key": org.access_key, "url": site.url("/colours.html"), "viewport_width": "200",
                  "viewport_height": "100", "timeout": "15"}
        if turn % 4 == 0:
            params.update({"async": "true", "webhook_url": receiver.url("/hook"), "webhook_errors": "true"})
        response = http.get("/v1/screenshot/take", params=params)
        with load.lock:
            if response.status_code == 202:
                load.accepted.append(response.json()["reference"])
            elif response.status_code == 200:
                assert decode(response.content).width == 200
                load.captured += 1
                load.after_kill += killed.is_set()
            else:
                code = response.json()["error_code"]
                assert code in RETRYABLE, response.text
                load.refused[code] = load.refused.get(code, 0) + 1


def every_slot_free(http: httpx.Client, org: Org) -> None:
    """No slot stays held: a request answered temporary_unavailable while Redis failed over frees its slot once
    the new primary takes writes (service.quota.QuotaKeeper.settle), within its retry pause, not at its expiry."""
    def remaining() -> int:
        usage = http.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()
        return int(usage["concurrency"]["remaining"])

    wait_for(lambda: remaining() == CONCURRENCY, FREE_LATER_MOST_SECONDS * 3, "every concurrency slot free again")


def test_a_primary_killed_under_load_fails_over_and_the_books_stay_exact(
        deployment: Deployment, service: RunningService, org: Org, site: Site) -> None:
    load, stop, killed = Load(), threading.Event(), threading.Event()
    old = deployment.primary()
    with Receiver() as receiver, httpx.Client(base_url=service.url, timeout=60) as http:
        clients = [threading.Thread(target=_client, args=(http, org, site, receiver, load, stop, killed))
                   for _ in range(CLIENTS)]
        for thread in clients:
            thread.start()
        try:
            wait_for(lambda: load.captured >= 4, 60, "a steady load")
            deployment.redis[old].kill()
            killed_at = time.monotonic()
            killed.set()
            wait_for(lambda: deployment.primary() != old, 30, "the sentinels' failover")
            promoted = time.monotonic() - killed_at
            wait_for(lambda: load.after_kill >= 4, 60, "captures on the new primary")
            resumed = time.monotonic() - killed_at
        finally:
            stop.set()
            for thread in clients:
                thread.join(60)
        print(f"\nfailover: promoted after {promoted:.1f} s, captures resumed within {resumed:.1f} s; "  # noqa: T201
              f"{load.captured} captured, {len(load.accepted)} async, refused {load.refused}")
        assert promoted <= 10, "the sentinels took longer than their own settings allow"
        assert resumed - promoted <= RECOVERY_MARGIN_SECONDS, (promoted, resumed)

        def told() -> dict[str, list[Received]]:
            found: dict[str, list[Received]] = {}
            for delivery in receiver.to("/hook"):
                found.setdefault(delivery.headers["x-service-reference"], []).append(delivery)
            return found

        wait_for(lambda: set(told()) >= set(load.accepted), 120, "a webhook of every async job accepted")
        endings = told()
        assert set(endings) == set(load.accepted)
        for reference, deliveries in endings.items():  # none failed, none lost, each told once
            assert [d.headers["content-type"] for d in deliveries] == ["image/png"], (reference, deliveries)
            assert deliveries[0].headers["idempotency-key"] == reference
            status = http.get(f"/v1/screenshot/jobs/{reference}", params={"access_key": org.access_key}).json()
            assert status["status"] == "done", status
        usage = http.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()
        assert usage["used"] == load.captured + len(load.accepted)
        every_slot_free(http, org)



class Interrupted(Exception):
    """What RQ raises from its SIGTERM handler while a worker blocks on Redis (StopRequested)."""


def test_an_interrupted_read_does_not_hand_its_late_reply_to_the_next_command(deployment: Deployment) -> None:
    """redis-py 8.1 kept a Sentinel-managed connection open when a read was interrupted: a worker stopped in
    its blocking pop then read that pop's reply as its next transaction's ("Wrong number of response items")."""
    client = deployment.target().sync(max_connections=1)  # one connection: the next command gets the same one

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(Interrupted):
            client.blpop(["test:interrupted"], 2)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    other = deployment.target().sync()
    try:
        other.rpush("test:interrupted", "late")  # the pop, still waiting in Redis, now answers
        time.sleep(0.2)
        with client.pipeline() as pipe:
            assert pipe.set("test:next", "1").get("test:next").execute() == [True, b"1"]
    finally:
        close(other)
        close(client)


def test_a_primary_refusing_writes_while_a_job_finishes_loses_nothing(
        deployment: Deployment, service: RunningService, org: Org, site: Site) -> None:
    """The primary refuses writes (NOREPLICAS: fewer good replicas than min-replicas-to-write, as when its
    replicas lag past min-replicas-max-lag on a busy machine) just as an async job's capture is done. Once it
    takes writes again the job ends once, charged once, told its webhook once, and the workers serve on."""
    primary = redis.Redis(port=deployment.primary(), password=PASSWORD, socket_timeout=5)
    params = {"access_key": org.access_key, "viewport_width": "200", "viewport_height": "100", "timeout": "20"}
    with Receiver() as receiver, httpx.Client(base_url=service.url, timeout=60) as http:
        before = http.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"]
        slow = f"/slow?ms=2500&n={time.monotonic_ns()}"
        accepted = http.get("/v1/screenshot/take", params={
            **params, "url": site.url(slow), "async": "true", "webhook_url": receiver.url("/refused"),
            "webhook_errors": "true"})
        assert accepted.status_code == 202, accepted.text
        reference = accepted.json()["reference"]
        wait_for(lambda: slow.split("?")[1] in site.queries_to("/slow"), 30, "the job's page asked for")
        primary.config_set("min-replicas-to-write", "3")  # two replicas: every write is refused
        try:
            with pytest.raises(redis.ResponseError, match="NOREPLICAS"):
                primary.set("test:refused", "1")
            assert service.log is not None
            log = Path(service.log.name)
            wait_for(lambda: f"could not finish job {reference}" in log.read_text(), 30,
                     "the worker refused as it finishes the job")
            time.sleep(2)  # a few retries refused too
            assert primary.hget(job_key(reference), "status") == b"rendering"
            refused = http.get("/v1/screenshot/take", params={**params, "url": site.url("/colours.html")})
            assert refused.status_code == 503 and refused.json()["error_code"] == "temporary_unavailable", \
                refused.text
        finally:
            primary.config_set("min-replicas-to-write", "1")
        wait_for(lambda: receiver.to("/refused"), 60, "the job's webhook")
        time.sleep(2)  # a second delivery would come by now
        deliveries = receiver.to("/refused")
        assert [d.headers["content-type"] for d in deliveries] == ["image/png"], deliveries
        assert deliveries[0].headers["x-service-reference"] == reference
        status = http.get(f"/v1/screenshot/jobs/{reference}", params={"access_key": org.access_key}).json()
        assert status["status"] == "done", status
        after = http.get("/v1/screenshot/take", params={**params, "url": site.url("/colours.html")})
        assert after.status_code == 200, after.text  # the worker served on
        assert service.processes["worker0"].poll() is None
        usage = http.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()
        assert usage["used"] == before + 2  # the job once, the capture after
        every_slot_free(http, org)
