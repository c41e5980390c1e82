"""Organisations that share one deployment cannot hurt each other (render.queue.lanes): one floods a two-worker
service with async captures past its queue, another's captures meanwhile are never refused and wait behind no
more than the jobs the workers have in hand, and every accepted job of the flood still ends, exactly once.

How long the quiet organisation's captures take, alone and behind the flood, is measured by `bench/` (the fairness
scenario), not asserted here: what is asserted is the order, which does not depend on this machine's speed."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from render.queue.keys import LANE_KEY, job_key
from render.worker.cpus import GROUP_NICE, batch_cpus, can_raise_scheduling, groups_by_session
from tests.conftest import Org
from tests.support.servers import RunningService, metric, process_tree, running_service, wait_for
from tests.support.site import Site

MAX_QUEUE = 30
FLOOD = 90  # three times the queue: most of it refused, the rest a backlog of 15 times the fleet
WORKERS = 2


@pytest.fixture(scope="module")
def shared(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    log_path = tmp_path_factory.mktemp("fair-logs") / "service.log"
    with log_path.open("wb") as log, running_service(
            redis_url.rsplit("/", 1)[0] + "/12", tmp_path_factory.mktemp("fair"), workers=WORKERS, log=log,
            SCREENSHOT_MAX_QUEUE=str(MAX_QUEUE), SCREENSHOT_LOG_LEVEL="INFO", SCREENSHOT_LOG_FORMAT="text") as running:
        running.log_path = log_path  # type: ignore[attr-defined]
        yield running


def take(http: httpx.Client, org: Org, site: Site, path: str, **params: str) -> httpx.Response:
    return http.get("/v1/screenshot/take", params={
        "access_key": org.access_key, "url": site.url(path), "viewport_width": "200", "viewport_height": "100",
        **params})


def used(http: httpx.Client, org: Org) -> int:
    return int(http.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"])


def test_a_flood_past_its_share_neither_locks_out_nor_delays_another_organisation(
        shared: RunningService, site: Site, make_org_in) -> None:  # type: ignore[no-untyped-def]
    noisy = make_org_in(shared.redis_url, quota=10_000, concurrency=400)
    quiet = make_org_in(shared.redis_url, quota=100, concurrency=2)
    with httpx.Client(base_url=shared.url, timeout=120) as http:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            flood = list(pool.map(lambda n: take(http, noisy, site, f"/slow?ms=500&n={n}", **{"async": "true"}),
                                  range(FLOOD)))
        accepted = [answer.json()["reference"] for answer in flood if answer.status_code == 202]
        refused = [answer for answer in flood if answer.status_code != 202]
        assert refused and len(accepted) >= MAX_QUEUE, (len(accepted), [a.text for a in refused[:2]])
        for answer in refused:  # past its share: told to come back, never charged
            assert answer.status_code == 503 and answer.json()["error_code"] == "temporary_unavailable"
            assert int(answer.headers["retry-after"]) > 0 and "share" in answer.json()["error_message"]

        # Seen from outside: the backlog by organisation, the refusals by reason.
        assert metric(http, f'screenshot_queue_backlog{{organisation="{noisy.id}"}}') > 0
        assert metric(http, 'screenshot_refusals_total{reason="queue_share"}') == len(refused)

        # The quiet organisation's captures, behind a backlog the workers need seconds to drain: none is refused,
        # and each waits only for a worker to finish the job in hand (first in, first out, each would wait for
        # all of the backlog: more than MAX_QUEUE of the flood's jobs would end while it waits).
        for n in range(8):
            before = used(http, noisy)
            answer = take(http, quiet, site, f"/colours.html?n={n}")
            assert answer.status_code == 200, answer.text
            assert used(http, noisy) - before <= 2 * WORKERS + 1, f"capture {n} waited behind the flood"
        # The flood's own organisation, waiting for a capture: before its own batch work, too.
        before = used(http, noisy)
        assert take(http, noisy, site, "/colours.html").status_code == 200
        assert used(http, noisy) - before <= 2 * WORKERS + 1
        assert used(http, noisy) < len(accepted), "the backlog was still there while they were served"

        # Every accepted job of the flood ends, done, and is charged once; nothing refused is charged.
        wait_for(lambda: used(http, noisy) == len(accepted) + 1, 180, "the flood's backlog to drain")
        for reference in accepted:
            record = http.get(f"/v1/screenshot/jobs/{reference}", params={"access_key": noisy.access_key}).json()
            assert record["status"] == "done", record
        time.sleep(2)
        assert used(http, noisy) == len(accepted) + 1 and used(http, quiet) == 8
        # Every job's wait counted by its class: the flood's as batch, the captures clients waited for as
        # interactive (the warm-up of the service's workers included).
        assert metric(http, 'screenshot_queue_wait_seconds_count{class="batch"}') == len(accepted)
        assert metric(http, 'screenshot_queue_wait_seconds_count{class="interactive"}') >= 9
        assert metric(http, 'screenshot_queue_backlog{organisation="other"}') == 0
        with pytest.raises(KeyError):  # an organisation with nothing waiting has no series
            metric(http, f'screenshot_queue_backlog{{organisation="{noisy.id}"}}')
    connection = redis.Redis.from_url(shared.redis_url)
    try:  # nothing left waiting, counted or held
        assert connection.llen(f"{LANE_KEY}:backlog") == 0
        assert connection.hlen(f"{LANE_KEY}:waiting") == 0
        assert not list(connection.scan_iter(f"{LANE_KEY}:batch:*"))
    finally:
        connection.close()
    log_text = Path(shared.log_path).read_text(errors="replace")  # type: ignore[attr-defined]
    assert log_text.count(f"organisation {noisy.id} is over its share") == 1, log_text[-3000:]
    wait_for(lambda: f"organisation {noisy.id} is back under its share" in Path(
        shared.log_path).read_text(errors="replace"), 30, "the API to say the flood is over")  # type: ignore[attr-defined]


def _cpus_of_tree(pid: int) -> set[str]:
    """Cpus_allowed_list of every thread of `pid` and of every process below it."""
    found = set()
    for process in process_tree(pid):
        for task in Path(f"/proc/{process}/task").glob("*"):
            with contextlib.suppress(OSError, IndexError):
                found.add((task / "status").read_text().split("Cpus_allowed_list:")[1].split()[0])
    return found


def _classes_below(pid: int) -> set[int]:
    """The scheduling policy of every thread of every process below `pid` (its Chromium, its driver)."""
    found = set()
    for process in process_tree(pid)[1:]:
        for task in Path(f"/proc/{process}/task").glob("*"):
            with contextlib.suppress(OSError):
                found.add(os.sched_getscheduler(int(task.name)))
    return found


def _group_nices_below(pid: int) -> dict[str, int]:
    """The nice of each session group (autogroup) of the processes below `pid`, by group: its Chromium's, its own."""
    found = {}
    for process in process_tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            group, _, nice = Path(f"/proc/{process}/autogroup").read_text().split()
            found[group] = int(nice)
    return found


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs or more")
def test_batch_work_keeps_off_the_reserve_s_cpus_while_clients_wait(
        shared: RunningService, site: Site, make_org_in) -> None:  # type: ignore[no-untyped-def]
    """SCREENSHOT_PIN_BATCH_WORK: an async capture taken while interactive captures come renders, its worker's
    Chromium included, on the CPUs but the reserve's share (render.worker.cpus), and, where the worker may raise
    them back (root here), with its Chromium and driver in the idle scheduling class; where the kernel groups
    threads by session, its Chromium's group lowered, the worker's own not."""
    org = make_org_in(shared.redis_url, quota=100, concurrency=4)
    batch = ",".join(str(cpu) for cpu in sorted(batch_cpus(frozenset(os.sched_getaffinity(0)), 0.25)))
    connection = redis.Redis.from_url(shared.redis_url)
    with httpx.Client(base_url=shared.url, timeout=120) as http:
        assert take(http, org, site, "/colours.html").status_code == 200  # a client waited: the reserve is in force
        accepted = take(http, org, site, f"/slow?ms=3000&n={time.monotonic_ns()}", **{"async": "true"})
        reference = accepted.json()["reference"]
        wait_for(lambda: connection.hget(job_key(reference), "status") == b"rendering", 30, "the job rendering")
        worker = int((connection.hget(job_key(reference), "worker") or b"").decode().split(".")[-2])
        seen = _cpus_of_tree(worker)
        assert seen == {batch}, seen
        classes = _classes_below(worker)
        assert classes == ({os.SCHED_IDLE} if can_raise_scheduling() else {os.SCHED_OTHER}), classes
        if groups_by_session():
            groups = _group_nices_below(worker)
            own = Path(f"/proc/{worker}/autogroup").read_text().split()[0]
            assert groups.pop(own) == 0 and groups and set(groups.values()) == {GROUP_NICE}, groups
        wait_for(lambda: connection.hget(job_key(reference), "status") == b"done", 30, "the job done")
    connection.close()
