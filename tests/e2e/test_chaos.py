"""Kills and Redis loss under load: one `screenshot-service run` instance, as an operator runs it
(two workers, a short webhook schedule), takes a burst of async captures with webhooks and sync captures,
some of pages that take 3 s, while a Chromium, a render worker, the webhook deliverer in the middle of a
delivery and the embedded redis-server are killed by PID. Nothing is lost, nothing is done twice, nothing
is left behind."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.e2e.instance import command_line, group_alive, processes_with, start_run
from tests.support.images import decode
from tests.support.receivers import Received, Receiver
from tests.support.servers import process_tree, wait_for
from tests.support.site import Site

pytestmark = pytest.mark.browser

ASYNC_JOBS, SYNC_JOBS = 60, 40
SLOW_EVERY = 10  # one capture in ten is of a page that takes 3 s to come
CONCURRENCY = 200
RETRYABLE = {"internal_application_error", "temporary_unavailable"}  # the spec's "safe to retry"


class HoldingReceiver:
    """Webhook receiver that, once armed, holds the next delivery unanswered until released: the deliverer
    is killed while it waits, so that attempt is never acknowledged."""

    def __init__(self) -> None:
        self.armed, self.holding, self.release = threading.Event(), threading.Event(), threading.Event()
        self.held: Received | None = None
        self.receiver = Receiver(self.answer)

    def answer(self, received: Received) -> tuple[int, dict[str, str], bytes]:
        if self.armed.is_set() and self.held is None:
            self.held = received
            self.holding.set()
            self.release.wait(60)
        return 200, {}, b""

    def acknowledged(self) -> dict[str, list[Received]]:
        """Deliveries answered to a live deliverer, by reference."""
        found: dict[str, list[Received]] = {}
        for delivery in self.receiver.to("/hook"):
            if delivery is not self.held:
                found.setdefault(delivery.headers["x-service-reference"], []).append(delivery)
        return found


def test_kills_and_redis_loss_under_a_burst_lose_nothing_repeat_nothing_leave_nothing(
        tmp_path: Path, site: Site) -> None:
    holding = HoldingReceiver()
    process, banner, data_dir, port, _ = start_run(
        tmp_path, SCREENSHOT_WORKERS="2", SCREENSHOT_WEBHOOK_RETRY_SCHEDULE="1,2,4",
        SCREENSHOT_DEFAULT_CONCURRENCY=str(CONCURRENCY), SCREENSHOT_WORKER_GRACE="1")
    key = re.search(r"access key:\s+(\S+)", banner).group(1)  # type: ignore[union-attr]
    base = f"http://127.0.0.1:{port}/v1/screenshot"

    def role(name: str) -> list[int]:
        return [pid for pid in processes_with(str(data_dir)) if f"service.cli {name}" in command_line(pid)]

    def page(number: int) -> str:
        return site.url("/slow?ms=3000" if number % SLOW_EVERY == 0 else f"/colours.html?n={number}")

    sync_outcomes: list[tuple[int, str]] = []  # (status, error code or content type)
    accepted: list[str] = []
    lock = threading.Lock()

    def sync_capture(number: int) -> None:
        response = httpx.get(f"{base}/take", timeout=90, params={
            "access_key": key, "url": page(number), "viewport_width": "200", "viewport_height": "100",
            "timeout": "30"})
        outcome = (response.status_code, response.json()["error_code"] if response.status_code != 200
                   else response.headers["content-type"])
        if response.status_code == 200:
            assert decode(response.content).width == 200
        with lock:
            sync_outcomes.append(outcome)

    def async_capture(number: int) -> None:
        response = httpx.get(f"{base}/take", timeout=90, params={
            "access_key": key, "url": page(number), "viewport_width": "200", "viewport_height": "100",
            "async": "true", "webhook_url": holding.receiver.url("/hook"), "webhook_errors": "true"})
        if response.status_code == 202:
            with lock:
                accepted.append(response.json()["reference"])
        else:  # refused while Redis was away: the client was told to retry, and nothing was started
            assert response.json()["error_code"] in RETRYABLE, response.text

    try:
        holding.receiver.__enter__()
        with ThreadPoolExecutor(8) as pool:
            work = [pool.submit(async_capture, n) if n % 5 < 3 else pool.submit(sync_capture, n)
                    for n in range(ASYNC_JOBS + SYNC_JOBS)]

            def successes() -> int:
                with lock:
                    return sum(status == 200 for status, _ in sync_outcomes)

            wait_for(lambda: successes() >= 5, 120, "a steady load")
            # A Chromium, killed under whatever job it renders: the job runs again on a new one.
            worker = role("worker")[0]
            browser = next(pid for pid in process_tree(worker)
                           if "chromium" in command_line(pid) and "--type=" not in command_line(pid))
            os.kill(browser, signal.SIGKILL)
            wait_for(lambda: successes() >= 10, 120, "captures after the Chromium was killed")
            # A render worker, killed with its whole group (its Chromium too), mid-job or not.
            os.killpg(role("worker")[0], signal.SIGKILL)
            # The deliverer, killed while a receiver holds its delivery.
            holding.armed.set()
            wait_for(holding.holding.is_set, 120, "a delivery in progress")
            deliverer = min(role("webhooks"))
            os.kill(deliverer, signal.SIGKILL)
            wait_for(lambda: not group_alive(deliverer), 30, "the dead deliverer's whole group ended")
            holding.release.set()
            # The embedded Redis.
            redis_pid = next(pid for pid in process_tree(process.pid)[1:] if "redis-server" in command_line(pid))
            os.kill(redis_pid, signal.SIGKILL)
            for done in work:
                done.result(timeout=300)

        def all_told() -> bool:
            return set(holding.acknowledged()) >= set(accepted)

        wait_for(all_told, 180, "an acknowledged delivery of every async job")
        time.sleep(3)  # a second delivery of any job would come by now (the retry schedule is 1, 2, 4 s)
        told = holding.acknowledged()
        assert holding.held is not None and holding.held.headers["x-service-reference"] in told, \
            "the interrupted delivery was made again"
        with httpx.Client(base_url=base, timeout=60, params={"access_key": key}) as http:
            # Every sync answer is a capture or a documented retryable error.
            assert {code for status, code in sync_outcomes if status != 200} <= RETRYABLE, sync_outcomes
            assert len(sync_outcomes) == SYNC_JOBS
            # Every async job accepted is done, once, with exactly one acknowledged delivery of its image.
            assert len(accepted) >= ASYNC_JOBS - 10, "most async jobs were accepted"
            for reference in accepted:
                deliveries = told.get(reference, [])
                assert [d.headers["content-type"] for d in deliveries] == ["image/png"], (reference, deliveries)
                assert deliveries[0].headers["idempotency-key"] == reference
                status = http.get(f"/jobs/{reference}").json()
                assert status["status"] == "done" and status["webhook"]["status"] == "delivered", status
            # Charged exactly what the callers got, and no concurrency slot held.
            usage = http.get("/usage").json()
            captured = sum(status == 200 for status, _ in sync_outcomes)
            assert usage["used"] == captured + len(accepted), (usage, captured, len(accepted))
            assert usage["concurrency"]["remaining"] == CONCURRENCY
            # Back to full strength, and a fresh capture works.
            wait_for(lambda: http.get(f"http://127.0.0.1:{port}/readyz").json().get("workers") == 2, 60,
                     "both workers back")
            fresh = http.get("/take", params={"url": site.url("/colours.html"), "viewport_width": "200",
                                              "viewport_height": "100"})
            assert fresh.status_code == 200 and decode(fresh.content).width == 200
        # Every process of the instance is in run's tree: nothing orphaned by the kills.
        assert set(processes_with(str(data_dir))) <= set(process_tree(process.pid))
    finally:
        holding.release.set()
        holding.receiver.__exit__(None, None, None)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=90)
    assert processes_with(str(data_dir)) == [], output
