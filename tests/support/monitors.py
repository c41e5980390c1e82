"""What the monitor tests share (tests/integration/test_monitors.py, test_monitor_scheduling.py): a monitor made
through the API and deleted after the test, its runs, a page that counts its fetches, and where the scheduling
stands when a wait fails."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import redis

from tests.conftest import Org
from tests.support.pages.watch import LivePage
from tests.support.site import Site

VIEW = {"viewport_width": 640, "viewport_height": 720, "device_scale_factor": 1}

_made: list[tuple[str, str, str]] = []  # (the API, the key, the monitor) of each monitor a test made


def create(client: httpx.Client, org: Org, **spec: Any) -> httpx.Response:
    answer = client.post("/v1/monitors", json={"access_key": org.access_key, **spec})
    if answer.status_code == 201:
        _made.append((str(client.base_url), org.access_key, answer.json()["id"]))
    return answer


def delete_made() -> None:
    """Deletes every monitor `create` made, passed or failed (each module's fixture calls it after each test): one
    left running each second kept a share's workers busy for the rest of its run (and another organisation's
    admission shared the queue with it)."""
    while _made:
        api, key, monitor_id = _made.pop()
        try:
            httpx.delete(f"{api.rstrip('/')}/v1/monitors/{monitor_id}", params={"access_key": key}, timeout=30)
        except httpx.HTTPError:
            pass  # its service is gone already


def runs(client: httpx.Client, org: Org, monitor_id: str) -> list[dict[str, Any]]:
    answer = client.get(f"/v1/monitors/{monitor_id}/runs", params={"access_key": org.access_key, "limit": 100})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["runs"])


def wait_until(check: Callable[[], Any], timeout: float, what: str,
               state: Callable[[], str] = lambda: "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s{state()}"
        time.sleep(0.2)


def scheduling_state(redis_url: str) -> str:
    """Where the monitors' jobs and RQ's schedulers stand, for a failure's message: a stall is told from the
    jobs waiting (scheduled, queued, started) and who holds each queue's scheduler lock."""
    connection = redis.Redis.from_url(redis_url, decode_responses=True)
    lines = []
    for queue in ("monitors", "webhooks"):
        holder = connection.get(f"rq:scheduler-lock:{queue}")
        record = connection.hgetall(f"rq:scheduler:{holder}") if holder else {}
        pid = record.get("pid", "")
        alive = pid.isdigit() and os.path.exists(f"/proc/{pid}")
        ttl = connection.ttl(f"rq:scheduler-lock:{queue}")
        scheduled = connection.zrange(f"rq:scheduled:{queue}", 0, 5, withscores=True)
        lines.append(f"{queue}: lock {holder} (ttl {ttl}, pid {pid or '?'}, {'alive' if alive else 'gone'}); "
                     f"scheduled {scheduled}; queued {connection.lrange(f'rq:queue:{queue}', 0, 5)}; "
                     f"started {connection.zrange(f'rq:wip:{queue}', 0, 5)}")
    lines.append(f"workers {sorted(connection.smembers('rq:workers'))}; now {time.time():.1f}")
    return "\n" + "\n".join(lines)


def live_page(site: Site) -> tuple[LivePage, str]:
    live, path = LivePage(), f"/watch/live-{uuid.uuid4().hex}.html"
    site.server.routes[path] = live
    return live, site.url(path)
