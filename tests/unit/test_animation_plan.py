"""The easing curves (exact values) and the scroll plan built from the animation parameters."""

from __future__ import annotations

import pytest

from animate.easing import EASINGS, ease
from animate.options import parse_animate_options
from animate.timeline import plan

# (curve, t) -> value, from the closed forms: in t^n, out 1-(1-t)^n, in-out 2^(n-1) t^n then mirrored.
EXACT = {
    "linear": {0.25: 0.25, 0.5: 0.5},
    "ease_in_quad": {0.25: 0.0625, 0.5: 0.25}, "ease_out_quad": {0.25: 0.4375, 0.5: 0.75},
    "ease_in_out_quad": {0.25: 0.125, 0.75: 0.875},
    "ease_in_cubic": {0.5: 0.125}, "ease_out_cubic": {0.5: 0.875}, "ease_in_out_cubic": {0.25: 0.0625, 0.75: 0.9375},
    "ease_in_quart": {0.5: 0.0625}, "ease_out_quart": {0.5: 0.9375}, "ease_in_out_quart": {0.25: 0.03125},
    "ease_in_quint": {0.5: 0.03125}, "ease_out_quint": {0.5: 0.96875},
    "ease_in_out_quint": {0.25: 0.015625, 0.75: 0.984375},
}


def test_there_are_the_thirteen_curves_of_the_spec() -> None:
    assert set(EASINGS) == set(EXACT) and len(EASINGS) == 13


@pytest.mark.parametrize("name", sorted(EXACT))
def test_each_curve_is_exact_starts_at_0_ends_at_1_and_never_goes_back(name: str) -> None:
    for t, value in EXACT[name].items():
        assert ease(name, t) == pytest.approx(value, abs=1e-12)
    assert ease(name, 0) == 0 and ease(name, 1) == pytest.approx(1)
    samples = [ease(name, i / 1000) for i in range(1001)]
    assert all(b >= a - 1e-12 for a, b in zip(samples, samples[1:], strict=False))
    if name.startswith("ease_in_out"):
        assert ease(name, 0.5) == pytest.approx(0.5)
    assert ease(name, -1) == 0 and ease(name, 2) == pytest.approx(1)  # clamped


def options(**params: str):  # type: ignore[no-untyped-def]
    return parse_animate_options({"url": "https://example.com/", "scenario": "scroll", "scroll_easing": "linear",
                                  **params})


def test_steps_pauses_and_scroll_back_once() -> None:
    timeline = plan(options(scroll_by="1000", scroll_duration="1000", scroll_delay="500"), max_scroll=2500)
    # 0-1000 down to 1000, pause, 1500-2500 to 2000, pause, 3000-4000 to 2500, pause, 4500-5500 back to 0.
    assert [(m.start, m.end, m.start_y, m.end_y) for m in timeline.motions] == [
        (0, 1000, 0, 1000), (1500, 2500, 1000, 2000), (3000, 4000, 2000, 2500), (4500, 5500, 2500, 0)]
    assert timeline.position(500) == 500 and timeline.position(1200) == 1000 and timeline.position(3500) == 2250
    assert timeline.completes == 5500 and timeline.position(9999) == 0


def test_repeat_reverses_the_steps() -> None:
    timeline = plan(options(scroll_by="1000", scroll_duration="100", scroll_delay="50",
                            scroll_back_algorithm="repeat"), max_scroll=1500)
    assert [m.end_y for m in timeline.motions] == [1000, 1500, 1000, 0]


def test_start_delay_stop_back_after_and_end_after() -> None:
    late = plan(options(scroll_start_immediately="false", scroll_start_delay="700", scroll_back="false"), 500)
    assert late.motions[0].start == 700 and late.position(600) == 0
    frozen = plan(options(scroll_stop_after_duration="750", scroll_by="1000", scroll_duration="1000"), 5000)
    assert frozen.position(750) == frozen.position(4000) == 750
    back = plan(options(scroll_back_after_duration="2000", scroll_by="500", scroll_duration="1000",
                        scroll_delay="500"), 5000)
    # Down 0-1000 and 1500-2500 (a step in progress finishes), then straight back up.
    assert [(m.start, m.end_y) for m in back.motions] == [(0, 500), (1500, 1000), (3000, 0)]
    to_end = plan(options(scroll_to_end_after="1200", scroll_by="100", scroll_duration="1000",
                          scroll_delay="500", scroll_back="false"), 5000)
    assert [(m.start, m.end_y) for m in to_end.motions] == [(0, 100), (1200, 5000)]


def test_till_selector_stops_at_the_target_and_an_unscrollable_page_does_not_move() -> None:
    assert plan(options(scroll_back="false"), max_scroll=5000, target=1234).motions[-1].end_y == 1234
    assert plan(options(), max_scroll=0).motions == []
