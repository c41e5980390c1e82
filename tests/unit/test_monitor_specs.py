"""render.contract.monitors: when a monitor's next run is due (intervals, cron in a time zone across a daylight
saving change, runs missed while nothing fired them), and what a schedule may be."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from render.contract.monitors import MonitorSpec, Schedule, next_due
from service.monitor_schedule import run_reference


def at(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_an_interval_counts_from_the_last_due_time() -> None:
    schedule = Schedule(interval=300)
    due = int(at("2026-11-26T10:00:00+00:00"))
    assert next_due(schedule, due, due + 0.4) == due + 300  # fired on time
    assert next_due(schedule, due, due + 299) == due + 300


def test_runs_missed_while_nothing_fired_them_are_not_made_up_one_by_one() -> None:
    schedule = Schedule(interval=60)
    due = int(at("2026-11-26T10:00:00+00:00"))
    # Fired 10.5 minutes late: the next run is the schedule's next time after now, not the ten missed ones.
    assert next_due(schedule, due, due + 630) == due + 660


def test_cron_times_are_read_in_the_time_zone_across_daylight_saving() -> None:
    schedule = Schedule(cron="30 9 * * *", timezone="Europe/Paris")
    # 2026-03-29: Paris moves from UTC+1 to UTC+2. 09:30 Paris is 08:30 UTC the day before, 07:30 UTC after.
    before = next_due(schedule, at("2026-03-28T09:00:00+00:00"), at("2026-03-28T09:00:00+00:00"))
    assert datetime.fromtimestamp(before, UTC) == datetime(2026, 3, 29, 7, 30, tzinfo=UTC)
    earlier = next_due(schedule, at("2026-03-27T12:00:00+00:00"), at("2026-03-27T12:00:00+00:00"))
    assert datetime.fromtimestamp(earlier, UTC) == datetime(2026, 3, 28, 8, 30, tzinfo=UTC)


def test_weekdays_only() -> None:
    schedule = Schedule(cron="0 9 * * 1-5")  # UTC
    friday_evening = at("2026-11-27T18:00:00+00:00")
    assert datetime.fromtimestamp(next_due(schedule, friday_evening, friday_evening), UTC) == datetime(
        2026, 11, 30, 9, 0, tzinfo=UTC)  # Monday


def test_the_shortest_gap_of_a_schedule() -> None:
    assert Schedule(interval=90).shortest_gap() == 90
    assert Schedule(cron="*/5 * * * *").shortest_gap() == 300
    assert Schedule(cron="0 9 * * *").shortest_gap() == 86400


@pytest.mark.parametrize(("schedule", "field"), [
    ({}, ()), ({"cron": "* * * * *", "interval": 60}, ()), ({"cron": "61 * * * *"}, ("cron",)),
    ({"cron": "* * * * * *"}, ("cron",)), ({"interval": 0}, ("interval",)),
    ({"cron": "0 9 * * *", "timezone": "Europe/Atlantis"}, ("timezone",)), ({"every": "day"}, ("every",)),
])
def test_bad_schedules_name_their_field(schedule: dict[str, object], field: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError) as raised:
        Schedule.model_validate(schedule)
    assert [error["loc"] for error in raised.value.errors()][0] == field


def test_a_spec_has_its_defaults() -> None:
    spec = MonitorSpec.model_validate({"request": {"url": "https://example.com/"}, "schedule": {"interval": 60}})
    assert (spec.only_on_change, spec.change_threshold, spec.threshold, spec.keep_runs, spec.pause_after_failures,
            spec.paused, spec.webhook_sign, spec.webhook_errors) == (True, 0.0, 24, 100, 5, False, True, True)


def test_a_run_has_one_reference_however_often_it_fires() -> None:
    first = run_reference("mon_1", 1_790_000_000)
    assert first == run_reference("mon_1", 1_790_000_000)
    assert first != run_reference("mon_1", 1_790_000_060) and first != run_reference("mon_2", 1_790_000_000)
    assert first.startswith(f"{1_790_000_000 * 1000:x}")  # sortable by time like every reference
