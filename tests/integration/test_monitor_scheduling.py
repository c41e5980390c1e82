"""Monitors' scheduling across processes: two APIs and two deliverers start each run once, a run due
while no deliverer runs starts once when one is back, a dead scheduler's lock is taken over, and a monitor whose
next run was lost is scheduled again by the sweep."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
import redis
from rq import Queue
from rq.serializers import JSONSerializer

from render.queue.keys import FIRE_FUNCTION
from tests.conftest import Org
from tests.support.monitors import VIEW, create, delete_made, live_page, runs, scheduling_state, wait_until
from tests.support.pages.watch import LivePage
from tests.support.servers import RunningService, running_service, start
from tests.support.site import Site

pytestmark = pytest.mark.browser


@pytest.fixture(autouse=True)
def _monitors_deleted() -> Iterator[None]:
    yield
    delete_made()


@pytest.fixture(scope="module")
def pair(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """Two APIs and two deliverers (each with RQ's scheduler) on a database of their own."""
    directory = tmp_path_factory.mktemp("monitors-pair")
    with (directory / "service.log").open("wb") as log, running_service(
            redis_url.rsplit("/", 1)[0] + "/11", directory, workers=1, log=log, apis=2,
            SCREENSHOT_MONITOR_MIN_INTERVAL="1", SCREENSHOT_LOG_LEVEL="INFO") as running:
        running.processes["webhooks1"] = start("webhooks", running.env, log)
        yield running


def each_due_once(history: list[dict[str, Any]], live: LivePage) -> list[str]:
    """The runs' due times, after checking none ran twice and every page load made a recorded run."""
    dues = [run["due"] for run in history]
    assert len(set(dues)) == len(dues), dues
    assert live.fetches == len(history), (live.fetches, dues)
    assert all(run["status"] == "done" for run in history), history
    return dues


def test_two_apis_and_two_deliverers_start_each_run_once(pair: RunningService, make_org_in, site: Site) -> None:  # type: ignore[no-untyped-def]
    org = make_org_in(pair.redis_url)
    live, url = live_page(site)
    with httpx.Client(base_url=pair.urls[0], timeout=60) as first, httpx.Client(base_url=pair.urls[1],
                                                                                timeout=60) as second:
        one_run_each(first, second, org, url, live, pair)


def one_run_each(first: httpx.Client, second: httpx.Client, org: Org, url: str, live: LivePage,
                 pair: RunningService) -> None:
    monitor = create(first, org, request={"url": url, **VIEW}, schedule={"interval": 1}).json()
    wait_until(lambda: len(runs(first, org, monitor["id"])) >= 4, 60, "four runs")
    changed = second.patch(f"/v1/monitors/{monitor['id']}", params={"access_key": org.access_key},
                           json={"name": "renamed"})  # a new revision, scheduled by the other API
    assert changed.status_code == 200 and changed.json()["name"] == "renamed"
    wait_until(lambda: len(runs(second, org, monitor["id"])) >= 7, 60, "seven runs")
    # The latest run fired again, twice at once, as a second scheduler would: it is not started again.
    latest = runs(first, org, monitor["id"])[0]
    due = int(datetime.fromisoformat(latest["due"].replace("Z", "+00:00")).timestamp())
    queue = Queue("monitors", connection=redis.Redis.from_url(pair.redis_url.rsplit("/", 1)[0] + "/11"),
                  serializer=JSONSerializer)
    shown = first.get(f"/v1/monitors/{monitor['id']}", params={"access_key": org.access_key}).json()
    revision = int(queue.connection.hget(f"monitor:{monitor['id']}", "revision"))  # type: ignore[arg-type]
    fired = [queue.enqueue_call(FIRE_FUNCTION, args=(monitor["id"], due, revision, 0))
             for _ in range(2)]
    wait_until(lambda: all(job.get_status(refresh=True) == "finished" for job in fired), 30, "the second firings")
    assert all(job.return_value().startswith("already started") for job in fired)
    assert shown["next_run"] is not None
    first.patch(f"/v1/monitors/{monitor['id']}", params={"access_key": org.access_key}, json={"paused": True})
    time.sleep(2)  # a run that fired before the pause may still be rendering
    each_due_once(runs(first, org, monitor["id"]), live)


def test_a_run_due_while_no_deliverer_runs_starts_once_when_one_is_back(pair: RunningService, make_org_in,  # type: ignore[no-untyped-def]
                                                                       site: Site) -> None:
    org = make_org_in(pair.redis_url)
    live, url = live_page(site)
    with httpx.Client(base_url=pair.url, timeout=60) as client:
        missed_then_restarted(client, org, url, live, pair)


def missed_then_restarted(client: httpx.Client, org: Org, url: str, live: LivePage, pair: RunningService) -> None:
    for role in ("webhooks", "webhooks1"):
        os.killpg(pair.processes[role].pid, signal.SIGKILL)
        pair.processes[role].wait(10)
    monitor = create(client, org, request={"url": url, **VIEW}, schedule={"interval": 1}).json()
    created = time.time()
    time.sleep(3.5)  # the first run and three more are due; nothing can fire them
    assert live.fetches == 0
    for role in ("webhooks", "webhooks1"):
        pair.restart(role)
    history = wait_until(lambda: (found := runs(client, org, monitor["id"])) and found, 60, "the first run")
    wait_until(lambda: len(runs(client, org, monitor["id"])) >= 4, 60, "four runs")
    # Killed while runs come due and fire, one deliverer then the other: each run still starts once.
    for role in ("webhooks", "webhooks1"):
        pair.restart(role, kill=True)
        time.sleep(1.5)
    wait_until(lambda: len(runs(client, org, monitor["id"])) >= 8, 90, "eight runs",
               lambda: scheduling_state(pair.redis_url))
    client.patch(f"/v1/monitors/{monitor['id']}", params={"access_key": org.access_key}, json={"paused": True})
    time.sleep(2)  # a run that fired before the pause may still be rendering
    history = runs(client, org, monitor["id"])
    dues = sorted(int(datetime.fromisoformat(due.replace("Z", "+00:00")).timestamp())
                  for due in each_due_once(history, live))
    # The missed runs were not made up one by one: the first (due at creation) ran once, the next came due after
    # the deliverers were back.
    assert dues[0] <= created + 1 and dues[1] >= created + 3


def test_a_scheduler_lock_whose_holder_dies_after_the_deliverers_start_is_taken_over_at_their_maintenance(
        pair: RunningService, make_org_in, site: Site) -> None:  # type: ignore[no-untyped-def]
    """The monitors queue's scheduler lock is held by a scheduler of this machine that is still alive as both
    deliverers start (as when one is killed while the other starts), then dies: a deliverer's maintenance (every
    30 s) releases it and takes it over, well before the lock would lapse (held here for 300 s)."""
    org = make_org_in(pair.redis_url)
    live, url = live_page(site)
    connection = redis.Redis.from_url(pair.redis_url)
    for role in ("webhooks", "webhooks1"):
        os.killpg(pair.processes[role].pid, signal.SIGKILL)
        pair.processes[role].wait(10)
    holder = subprocess.Popen(["sleep", "300"])
    try:
        connection.set("rq:scheduler-lock:monitors", "dying-scheduler", ex=300)
        connection.hset("rq:scheduler:dying-scheduler", mapping={"hostname": socket.gethostname(),
                                                                  "pid": str(holder.pid)})
        connection.expire("rq:scheduler:dying-scheduler", 300)
        with httpx.Client(base_url=pair.url, timeout=60) as client:
            monitor = create(client, org, request={"url": url, **VIEW}, schedule={"interval": 1}).json()
            for role in ("webhooks", "webhooks1"):
                pair.restart(role)
            time.sleep(3)
            assert live.fetches == 0  # the lock's holder lives: nothing moves the monitor's runs
            holder.kill()
            holder.wait(10)
            wait_until(lambda: runs(client, org, monitor["id"]), 60, "a run after the holder died",
                       lambda: scheduling_state(pair.redis_url))
            client.patch(f"/v1/monitors/{monitor['id']}", params={"access_key": org.access_key},
                         json={"paused": True})
    finally:
        holder.kill()
        connection.delete("rq:scheduler:dying-scheduler")
        connection.eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end "
                        "return 0", 1, "rq:scheduler-lock:monitors", "dying-scheduler")


def test_a_monitor_whose_next_run_was_lost_is_scheduled_again_by_the_sweep(pair: RunningService, make_org_in,  # type: ignore[no-untyped-def]
                                                                         site: Site) -> None:
    org = make_org_in(pair.redis_url)
    live, url = live_page(site)
    with httpx.Client(base_url=pair.url, timeout=60) as client:
        monitor = create(client, org, request={"url": url, **VIEW}, schedule={"interval": 3600}).json()
        wait_until(lambda: runs(client, org, monitor["id"]), 30, "the first run")
        # A run is its monitor and its due second (service.monitor_schedule.run_reference): the run scheduled again
        # below is due when the sweep finds it, which must not be the first run's second, or it is that run.
        time.sleep(1.1)
        # The next run's job is lost (as when a firing fails before it schedules the next, or Redis loses it),
        # and it has been overdue for long.
        connection = redis.Redis.from_url(pair.redis_url)
        due = int(connection.zscore("monitors:due", monitor["id"]) or 0)
        assert due >= time.time() + 3000
        Queue("monitors", connection=connection, serializer=JSONSerializer).scheduled_job_registry.remove(
            f"monitor-{monitor['id']}-{due}", delete_job=True)
        connection.zadd("monitors:due", {monitor["id"]: time.time() - 1000})
        # The sweep schedules it within seconds; RQ's scheduler then moves it to the queue, and its lock may still be
        # on its way to a deliverer after the test before (taken at the deliverers' maintenance, every 30 s).
        wait_until(lambda: len(runs(client, org, monitor["id"])) >= 2, 60, "the run scheduled again",
                   lambda: scheduling_state(pair.redis_url))
        time.sleep(1)
        history = runs(client, org, monitor["id"])
        each_due_once(history, live)
        assert len(history) == 2  # once, and its next is an hour away again
        assert int(connection.zscore("monitors:due", monitor["id"]) or 0) >= time.time() + 3000
        connection.close()
