"""render.contract.timings and the page watch's status rule: stages, what fired, the Server-Timing header."""

from __future__ import annotations

import re

import pytest

from render.contract.timings import CACHE_HIT, STAGES, Stopwatch, server_timing
from render.page.watch import status_matches


def test_stages_add_up_and_come_out_in_the_capture_s_order() -> None:
    clock = Stopwatch()
    clock.add("capture", 0.0201)
    clock.add("navigation", 0.010)
    clock.add("navigation", 0.005)
    with clock.stage("waits"):
        pass
    report = clock.report()
    assert list(report["stages_ms"]) == ["navigation", "waits", "capture"]
    assert report["stages_ms"]["navigation"] == 15.0 and report["stages_ms"]["capture"] == 20.1
    assert (report["fired"], report["timed_out"]) == ("load", [])


def test_a_stage_that_raises_is_still_counted() -> None:
    clock = Stopwatch()
    with pytest.raises(ValueError), clock.stage("capture"):
        raise ValueError
    assert "capture" in clock.seconds


def test_a_wait_that_runs_out_is_the_reason_and_copies_go_their_own_way() -> None:
    clock = Stopwatch()
    clock.fired = "selector"
    clock.ran_out("wait_for_expression")
    twin = clock.copy()
    twin.add("encode", 0.001)
    assert "encode" not in clock.seconds
    assert (twin.fired, twin.timed_out) == ("best_attempt", ["wait_for_expression"])


def test_the_header_is_w3c_server_timing() -> None:
    header = server_timing({"stages_ms": {"capture": 31.5, "queue": 0.4}, "fired": "network_idle"})
    metric = re.compile(r'^[a-z]+(;dur=\d+(\.\d+)?)?(;desc="[^",]*")?$')
    metrics = header.split(", ")
    assert all(metric.match(each) for each in metrics), header
    assert metrics == [f'queue;dur=0.4;desc="{STAGES["queue"]}"', f'capture;dur=31.5;desc="{STAGES["capture"]}"',
                       'fired;desc="network_idle"']
    assert server_timing(CACHE_HIT) == 'fired;desc="cache"'
    assert server_timing({"stages_ms": {}, "fired": "something else"}) == ""


@pytest.mark.parametrize(("status", "patterns", "matches"), [
    (404, ["404"], True), (404, ["4xx"], True), (503, ["4xx"], False), (500, ["5xx", "404"], True),
    (200, ["2xx"], True), (410, ["404"], False), (404, [], False),
], ids=repr)
def test_statuses_match_codes_and_classes(status: int, patterns: list[str], matches: bool) -> None:
    assert status_matches(status, patterns) is matches
