"""render.worker.health: when a worker says it cannot render, and what it says."""

from __future__ import annotations

import pytest

from render.worker import health
from render.worker.health import BrowserHealth, cause


def test_a_new_worker_cannot_render_until_its_first_probe() -> None:
    state = BrowserHealth()
    assert state.reason is not None and state.probe_due()
    state.recovered()
    assert state.reason is None and not state.probe_due()


def test_a_failed_probe_says_what_to_fix_and_backs_off(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(health.time, "monotonic", lambda: now[0])
    state = BrowserHealth()
    error = RuntimeError("BrowserType.launch: Target page, context or browser has been closed\nBrowser logs:\n"
                         "Chromium sandboxing failed!\n=====\nCall log:\n  - <launching> chromium")
    state.failed("Chromium could not start", error)
    assert state.reason is not None and state.reason.startswith("Chromium could not start: Chromium sandboxing failed!")
    assert "seccomp-chromium.json" in state.reason
    waits = []
    for _ in range(6):
        start = now[0]
        while not state.probe_due():
            now[0] += 0.5
        waits.append(now[0] - start)
        state.failed("Chromium could not start", error)
    assert waits == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_chromium_dying_under_jobs_again_and_again_makes_the_worker_unhealthy(monkeypatch: pytest.MonkeyPatch
                                                                              ) -> None:
    now = [0.0]
    monkeypatch.setattr(health.time, "monotonic", lambda: now[0])
    state = BrowserHealth()
    state.recovered()
    for _ in range(health.DEATHS_IN_ROW - 1):  # a page that kills its browser now and then is not the worker's fault
        state.browser_died()
        now[0] += 30
    assert state.reason is None
    now[0] += 60  # spread out: still healthy
    state.browser_died()
    assert state.reason is None
    for _ in range(health.DEATHS_IN_ROW):
        state.browser_died()
        now[0] += 5
    assert state.reason is not None and "keeps dying" in state.reason


def test_one_browser_lost_under_every_job_slot_s_job_counts_once() -> None:
    state = BrowserHealth()
    state.recovered()
    browsers = [object() for _ in range(health.DEATHS_IN_ROW - 1)]
    for browser in browsers:
        for _ in range(4):  # its loss seen by each of four slots' jobs
            state.browser_died(browser)
    assert state.reason is None
    state.browser_died(object())
    assert state.reason is not None and "keeps dying" in state.reason


@pytest.mark.parametrize(("text", "expected"), [
    ("plain failure\nmore", "plain failure"),
    ("", "RuntimeError"),
    ("launch failed\nBrowser logs:\n\n[FATAL] out of memory\n", "[FATAL] out of memory"),
])
def test_the_cause_is_the_line_that_says_it(text: str, expected: str) -> None:
    assert cause(RuntimeError(text)) == expected
