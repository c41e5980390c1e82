"""Monitors: a page captured on a schedule, each run compared with the last success, the webhook told
only of changes; monitors created, listed, changed, paused (by hand and after failures in a row) and deleted;
bad specs refused naming their field."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
import zoneinfo
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import jsonschema
import pytest
from croniter import croniter

from tests.conftest import Org
from tests.support.images import decode
from tests.support.monitors import VIEW, create, delete_made, live_page, runs, wait_until
from tests.support.pages.watch import IMAGE_BOX, PRICE_BOX, LivePage
from tests.support.receivers import Receiver
from tests.support.servers import ROOT, RunningService
from tests.support.site import Site

pytestmark = pytest.mark.browser


@pytest.fixture(autouse=True)
def _monitors_deleted() -> Iterator[None]:
    yield
    delete_made()


def conforms(client: httpx.Client, schema: str, answer: Any) -> None:
    """`answer` is what /openapi.json's component `schema` describes (JSON Schema 2020-12, as OpenAPI 3.1 has it,
    its references resolved in the document): what a generated client checks."""
    document = client.get("/openapi.json").json()
    jsonschema.Draft202012Validator({**document, "$ref": f"#/components/schemas/{schema}"}).validate(answer)


def inside(box: dict[str, int], area: tuple[int, int, int, int], slack: int = 2) -> bool:
    x, y, width, height = area
    return (box["x"] >= x - slack and box["y"] >= y - slack and box["x"] + box["width"] <= x + width + slack
            and box["y"] + box["height"] <= y + height + slack)


def unchanged_for(live: LivePage, seconds: float) -> bool:
    """Whether nothing fetched `live` in the next `seconds`."""
    fetches = live.fetches
    time.sleep(seconds)
    return live.fetches == fetches


def used(client: httpx.Client, org: Org) -> int:
    return int(client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"])


def test_a_monitor_tells_its_webhook_of_changes_only_and_one_on_a_static_page_never(  # type: ignore[no-untyped-def]
        client: httpx.Client, make_org, site: Site) -> None:
    org = make_org()
    live, url = live_page(site)
    with Receiver() as receiver:
        changing = create(client, org, name="pricing", request={"url": url, **VIEW}, schedule={"interval": 1},
                          webhook_url=receiver.url("/changing"))
        assert changing.status_code == 201, changing.text
        static = create(client, org, request={"url": site.url("/watch/page.html"), **VIEW},
                        schedule={"interval": 1}, webhook_url=receiver.url("/static"))
        assert static.status_code == 201, static.text
        changing_id, static_id = changing.json()["id"], static.json()["id"]
        # The first run at once (the baseline), then one unchanged run.
        wait_until(lambda: len(runs(client, org, changing_id)) >= 2, 30, "two runs")
        assert receiver.to("/changing") == []
        # Each run is compared with the last success: from "text" to "image" the price changes back as well.
        changes = [("text", [PRICE_BOX]), ("image", [PRICE_BOX, IMAGE_BOX])]
        for count, (version, areas) in enumerate(changes, start=1):
            fetched = live.fetches
            live.version = version
            told = receiver.wait_for("/changing", count, timeout=30)[-1].json()
            assert told["monitor_id"] == changing_id and told["changed"] is True and told["status"] == "done"
            history = runs(client, org, changing_id)
            assert len(history) >= fetched + 1  # the run that saw the change came after it
            at = [run["reference"] for run in history].index(told["reference"])
            assert told["previous_reference"] == history[at + 1]["reference"]  # compared with the run before it
            boxes = told["change"]["boxes"]
            assert all(any(inside(box, area) for area in areas) for box in boxes), boxes
            assert all(any(inside(box, area) for box in boxes) for area in areas), boxes
            diff = decode(httpx.get(told["diff"]["url"], timeout=30).content)
            assert (diff.width, diff.height) == (640, 720)
        wait_until(lambda: len(runs(client, org, changing_id)) >= len(history) + 1, 30, "an unchanged run")
        for monitor_id in (changing_id, static_id):
            assert client.delete(f"/v1/monitors/{monitor_id}", params={"access_key": org.access_key}).status_code == 200
        # A run already handed to a worker may still load the page (a batch job's browser may wait up to a second
        # for CPU other work wants: render.worker.cpus); once none has for 2 s, none may for 3 s more.
        wait_until(lambda: unchanged_for(live, 2), 30, "the runs in flight to end")
        fetches = live.fetches
        time.sleep(3)
        assert live.fetches == fetches  # deleted: no run fires any more
        assert len(receiver.to("/changing")) == 2 and receiver.to("/static") == []
    assert used(client, org) >= live.fetches + 2  # every run charged as a capture (the static page's too)
    exported = client.get("/metrics").text
    assert all(f'screenshot_monitor_runs_total{{outcome="{outcome}"}}' in exported
               for outcome in ("unchanged", "changed", "failed"))
    changed = float(exported.split('screenshot_monitor_runs_total{outcome="changed"} ')[1].split()[0])
    assert changed >= 2


def test_runs_are_listed_newest_first_with_their_change(client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    org = make_org()
    live, url = live_page(site)
    created = create(client, org, request={"url": url, **VIEW}, schedule={"interval": 1}, keep_runs=3,
                     change_threshold=0.5)
    assert created.status_code == 201, created.text
    operation = client.get("/openapi.json").json()["paths"]["/v1/monitors"]["post"]
    assert "201" in operation["responses"] and "200" not in operation["responses"]  # as answered
    monitor = created.json()
    conforms(client, "Monitor", monitor)
    wait_until(lambda: len(runs(client, org, monitor["id"])) >= 1, 30, "the first run")
    live.version = "layout"
    wait_until(lambda: live.fetches >= 5 and len(runs(client, org, monitor["id"])) == 3, 30, "five runs")
    history = runs(client, org, monitor["id"])
    assert len(history) == 3  # keep_runs
    assert [run["due"] for run in history] == sorted((run["due"] for run in history), reverse=True)
    for run in history:
        assert run["status"] == "done" and run["screenshot"]["url"]
        if run["change"] is not None:  # small changes under change_threshold=0.5 are not changes
            assert run["changed"] is False
    shown = client.get(f"/v1/monitors/{monitor['id']}", params={"access_key": org.access_key}).json()
    assert shown["last_run"]["reference"] in [run["reference"] for run in runs(client, org, monitor["id"])[:2]]
    # Every answer is what the OpenAPI says (a Monitor with its last run, the list, the runs).
    conforms(client, "Monitor", shown)
    conforms(client, "Monitors", client.get("/v1/monitors", params={"access_key": org.access_key}).json())
    conforms(client, "MonitorRuns", {"runs": history})
    client.delete(f"/v1/monitors/{monitor['id']}", params={"access_key": org.access_key})


def test_a_monitor_pauses_itself_after_failures_in_a_row_and_resumes(client: httpx.Client, make_org,  # type: ignore[no-untyped-def]
                                                                    site: Site) -> None:
    org = make_org()
    with Receiver() as receiver:
        monitor = create(client, org, request={"url": "http://127.0.0.1:9/", **VIEW}, schedule={"interval": 1},
                         pause_after_failures=2, webhook_url=receiver.url("/failures")).json()
        monitor_id = monitor["id"]
        shown = wait_until(lambda: (found := client.get(f"/v1/monitors/{monitor_id}", params={
            "access_key": org.access_key}).json())["paused"] and found, 30, "the pause")
        assert shown["paused_reason"] == "2 failed runs in a row" and shown["next_run"] is None
        told = receiver.wait_for("/failures", 2)
        assert [t.json()["status"] for t in told] == ["failed", "failed"] and told[0].json()["error_code"]
        time.sleep(2.5)
        assert len(runs(client, org, monitor_id)) == 2  # paused: nothing more fires
        assert used(client, org) == 0  # failures are not charged
        _, url = live_page(site)
        resumed = client.patch(f"/v1/monitors/{monitor_id}", params={"access_key": org.access_key},
                               json={"paused": False, "request": {"url": url, **VIEW}})
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["paused"] is False and resumed.json()["failures_in_row"] == 0
        wait_until(lambda: runs(client, org, monitor_id)[0]["status"] == "done", 30, "a run after resuming")
        paused = client.patch(f"/v1/monitors/{monitor_id}", params={"access_key": org.access_key},
                              json={"paused": True}).json()
        assert paused["paused"] is True and paused["next_run"] is None


class SlowPage:
    """A page that answers after 2.5 s, and the most fetches of it that were under way at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = 0

    def __call__(self, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(2.5)
            return 200, "text/html; charset=utf-8", b"<!doctype html><title>slow</title><h1>A slow page</h1>"
        finally:
            with self.lock:
                self.now -= 1


def test_a_run_due_while_the_one_before_is_under_way_is_skipped(client: httpx.Client, make_org,  # type: ignore[no-untyped-def]
                                                               site: Site) -> None:
    """A page slower than its monitor's interval: one run at a time (never two fetches of the page at once), each
    compared with the one before it; the runs due meanwhile are skipped and counted."""
    org = make_org()
    skipped_before = skipped_runs(client)
    slow, path = SlowPage(), f"/watch/slow-{uuid.uuid4().hex}.html"
    site.server.routes[path] = slow
    monitor = create(client, org, request={"url": site.url(path), **VIEW}, schedule={"interval": 1})
    assert monitor.status_code == 201, monitor.text
    monitor_id = monitor.json()["id"]
    history = wait_until(lambda: found if len(found := runs(client, org, monitor_id)) >= 3 else None, 90,
                         "three runs")
    assert client.delete(f"/v1/monitors/{monitor_id}", params={"access_key": org.access_key}).status_code == 200
    assert slow.most == 1, f"{slow.most} runs fetched the page at once"
    assert [run["status"] for run in history] == ["done"] * len(history), history
    for newer, older in zip(history, history[1:], strict=False):  # newest first
        assert newer["previous_reference"] == older["reference"], (newer, older)
    assert skipped_runs(client) > skipped_before


def skipped_runs(client: httpx.Client) -> float:
    found = re.search(r"^screenshot_monitor_runs_skipped_total (\S+)$", client.get("/metrics").text, re.M)
    assert found is not None, "/metrics has no screenshot_monitor_runs_skipped_total"
    return float(found.group(1))


def test_a_cron_schedule_runs_at_its_times_in_its_time_zone(client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    org = make_org()
    answer = create(client, org, request={"url": site.url("/watch/page.html"), **VIEW},
                    schedule={"cron": "30 9 * * 1-5", "timezone": "Europe/Paris"})
    assert answer.status_code == 201, answer.text
    monitor = answer.json()
    wait_until(lambda: runs(client, org, monitor["id"]), 30, "the first run")  # the baseline, at once
    shown = client.get(f"/v1/monitors/{monitor['id']}", params={"access_key": org.access_key}).json()
    paris = zoneinfo.ZoneInfo("Europe/Paris")
    expected = croniter("30 9 * * 1-5", datetime.now(paris)).get_next(datetime).astimezone(UTC)
    assert shown["next_run"] == expected.strftime("%Y-%m-%dT%H:%M:%SZ")
    other = make_org()  # another organisation sees nothing of it
    assert client.get(f"/v1/monitors/{monitor['id']}", params={"access_key": other.access_key}).status_code == 404
    for answer in (client.get(f"/v1/monitors/{monitor['id']}/runs", params={"access_key": other.access_key}),
                   client.patch(f"/v1/monitors/{monitor['id']}", json={"access_key": other.access_key, "paused": True}),
                   client.delete(f"/v1/monitors/{monitor['id']}", params={"access_key": other.access_key})):
        assert answer.status_code == 404 and "No monitor" in answer.json()["error_message"], answer.text
    assert client.get("/v1/monitors", params={"access_key": other.access_key}).json() == {"monitors": []}
    listed = client.get("/v1/monitors", params={"access_key": org.access_key}).json()["monitors"]
    assert [m["id"] for m in listed] == [monitor["id"]]
    assert client.delete(f"/v1/monitors/{monitor['id']}", params={"access_key": org.access_key}).status_code == 200
    assert client.get(f"/v1/monitors/{monitor['id']}", params={"access_key": org.access_key}).status_code == 404


@pytest.mark.parametrize(("spec", "field"), [
    ({"schedule": {"interval": 60}}, "request"),
    ({"request": {"url": "http://127.0.0.1/"}, "schedule": {"interval": 60, "cron": "* * * * *"}}, "schedule"),
    ({"request": {"url": "http://127.0.0.1/"}, "schedule": {"cron": "every day"}}, "schedule.cron"),
    ({"request": {"url": "http://127.0.0.1/"}, "schedule": {"cron": "0 9 * * *", "timezone": "Mars/Olympus"}},
     "schedule.timezone"),
    ({"request": {"url": "http://127.0.0.1/", "format": "pdf"}, "schedule": {"interval": 60}}, "request.format"),
    ({"request": {"url": "http://127.0.0.1/", "webhook_url": "http://127.0.0.1/"}, "schedule": {"interval": 60}},
     "request.webhook_url"),
    ({"request": {"url": "http://127.0.0.1/"}, "schedule": {"interval": 60}, "change_threshold": 2},
     "change_threshold"),
    ({"request": {"url": "http://127.0.0.1/"}, "schedule": {"interval": 60}, "every": 1}, "every"),
])
def test_bad_monitors_are_refused_naming_their_field(client: httpx.Client, make_org, spec: dict[str, Any],  # type: ignore[no-untyped-def]
                                                    field: str) -> None:
    org = make_org()
    answer = create(client, org, **spec)
    assert answer.status_code == 400, answer.text
    assert field in [detail["field"] for detail in answer.json()["error_details"]], answer.json()
    assert client.get("/v1/monitors", params={"access_key": org.access_key}).json() == {"monitors": []}


def test_a_change_without_a_body_is_refused_and_an_empty_one_changes_nothing(  # type: ignore[no-untyped-def]
        client: httpx.Client, make_org, site: Site) -> None:
    """The contract run found it (tests/integration/test_contract.py): a PATCH with no body answered 200."""
    org = make_org()
    monitor = create(client, org, request={"url": site.url("/watch/page.html"), **VIEW}, schedule={"interval": 60},
                     paused=True).json()
    path, key = f"/v1/monitors/{monitor['id']}", {"x-access-key": org.access_key}
    refused = client.patch(path, headers=key)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error_code"] == "request_not_valid"
    assert [detail["field"] for detail in refused.json()["error_details"]] == ["body"]
    unchanged = client.patch(path, headers=key, json={})
    assert unchanged.status_code == 200, unchanged.text
    assert {k: v for k, v in unchanged.json().items() if k != "updated"} == {
        k: v for k, v in monitor.items() if k != "updated"}


def test_the_monitors_command_manages_them_through_the_api(service: RunningService, client: httpx.Client,  # type: ignore[no-untyped-def]
                                                          make_org, site: Site) -> None:
    org = make_org()
    live, url = live_page(site)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCREENSHOT_")}

    def cli(*args: str, key: str | None = org.access_key) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "service.cli", "monitors", "--api", service.url,
                               *(["--access-key", key] if key else []), *args],
                              capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)

    created = cli("create", url, "--every", "1", "--name", "from-cli", "--set", "viewport_width=320",
                  "--set", "device_scale_factor=1")
    assert created.returncode == 0, created.stderr
    found = re.search(r"mon_[0-9a-f]{16}", created.stdout)
    assert found, created.stdout
    monitor_id = found.group(0)
    wait_until(lambda: len(runs(client, org, monitor_id)) >= 2, 30, "two runs")
    listed = cli("list")
    assert listed.returncode == 0 and monitor_id in listed.stdout and "from-cli" in listed.stdout
    assert url in listed.stdout and "every 1 s" in listed.stdout
    history = cli("runs", monitor_id, "--limit", "2")
    assert history.returncode == 0 and len(history.stdout.splitlines()) == 2
    assert all("done" in line and "screenshot=http" in line for line in history.stdout.splitlines())
    paused = cli("pause", monitor_id)
    assert paused.returncode == 0 and "paused" in paused.stdout
    shown = json.loads(cli("show", monitor_id).stdout)
    assert shown["paused"] is True and shown["request"]["viewport_width"] == 320
    bad = cli("create", url, "--cron", "every day")
    assert bad.returncode == 1 and "schedule.cron" in bad.stderr
    assert cli("list", key=None).returncode == 2  # no key: says how to get one
    assert cli("delete", monitor_id).returncode == 0
    gone = cli("show", monitor_id)
    assert gone.returncode == 1 and "monitor_id" in gone.stderr
    assert live.fetches >= 2


def test_a_run_past_the_quota_is_a_failed_run_not_a_capture(client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    org = make_org(quota=1)
    live, url = live_page(site)
    monitor = create(client, org, request={"url": url, **VIEW}, schedule={"interval": 1},
                     pause_after_failures=1).json()
    shown = wait_until(lambda: (found := client.get(f"/v1/monitors/{monitor['id']}", params={
        "access_key": org.access_key}).json())["paused"] and found, 30, "the pause")
    history = runs(client, org, monitor["id"])
    assert [run["status"] for run in history] == ["failed", "done"]
    assert history[0]["error_code"] == "screenshots_limit_reached" and "did not start" in history[0]["error_message"]
    assert shown["paused_reason"] == "1 failed run in a row"
    assert live.fetches == 1 and used(client, org) == 1


def test_the_monitor_limit_holds_under_concurrent_creates(client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    """With 90 monitors, 40 creates at once: 10 are made and 30 refused naming SCREENSHOT_MONITORS_MAX (the count
    and the creation are one step in Redis); never more than the 100 the setting allows."""
    from concurrent.futures import ThreadPoolExecutor

    org = make_org()
    spec = {"request": {"url": site.url("/colours.html")}, "schedule": {"interval": 3600}, "paused": True}
    for _ in range(90):
        assert create(client, org, **spec).status_code == 201
    with ThreadPoolExecutor(max_workers=40) as pool:
        answers = list(pool.map(lambda _: create(client, org, **spec), range(40)))
    assert sorted(answer.status_code for answer in answers) == [201] * 10 + [400] * 30
    refusal = next(answer.json() for answer in answers if answer.status_code == 400)
    assert "SCREENSHOT_MONITORS_MAX" in refusal["error_message"]
    assert len(client.get("/v1/monitors", params={"access_key": org.access_key}).json()["monitors"]) == 100


def test_a_change_is_checked_as_a_create_is(client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    """PATCH takes the create's one validation path: a webhook that does not resolve, a schedule too close, a
    bad request are refused naming their field, and the monitor stays as it was."""
    org = make_org()
    made = create(client, org, request={"url": site.url("/colours.html")}, schedule={"interval": 3600},
                  paused=True).json()
    for change, field in (({"webhook_url": "http://nothing.invalid/hook"}, "webhook_url"),
                          ({"schedule": {"interval": 0.5}}, "schedule"),
                          ({"request": {"url": site.url("/colours.html"), "format": "pdf"}}, "request.format")):
        answer = client.patch(f"/v1/monitors/{made['id']}", json={"access_key": org.access_key, **change})
        assert answer.status_code == 400, answer.text
        assert any(detail["field"].startswith(field) for detail in answer.json()["error_details"]), answer.json()
    shown = client.get(f"/v1/monitors/{made['id']}", params={"access_key": org.access_key}).json()
    assert (shown["webhook_url"], shown["schedule"], shown["request"]) == (None, made["schedule"], made["request"])
