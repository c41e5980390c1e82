"""Monitors: a capture run on a schedule, each run compared with the last, the webhook told when the page
changed. What a monitor is (`MonitorSpec`, the API's body), when it runs next (`next_due`), and what a run's job
carries to its worker (`MonitorOrder`). Pure: the API, the deliverers (which fire runs) and the workers import it.
"""

from __future__ import annotations

import math
import zoneinfo
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Annotated, Any

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from render.contract.comparing import DEFAULT_THRESHOLD, ShareValue, ThresholdValue

KEEP_RUNS_MAX = 1000
MonitorName = Annotated[str, Field(min_length=1, max_length=200)]


class Schedule(BaseModel):
    """When a monitor runs: a cron expression (five fields, read in `timezone`) or an interval in seconds."""

    model_config = ConfigDict(extra="forbid")

    cron: str | None = Field(None, description="Five-field cron expression, e.g. `0 9 * * 1-5`, in `timezone`.")
    interval: int | None = Field(None, ge=1, le=366 * 86400, description="Seconds between runs.")
    timezone: str = Field("UTC", description="IANA time zone of `cron` (e.g. Europe/Paris).")

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError("not an IANA time zone (e.g. UTC, Europe/Paris)") from None
        return value

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str | None) -> str | None:
        if value is not None and (len(value.split()) != 5 or not croniter.is_valid(value)):
            raise ValueError("not a five-field cron expression (minute hour day month weekday)")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> Schedule:
        if (self.cron is None) == (self.interval is None):
            raise ValueError("give either cron or interval")
        return self

    def shortest_gap(self) -> float:
        """The least time between two runs (cron: between its next two times)."""
        if self.interval is not None:
            return float(self.interval)
        assert self.cron is not None
        runs = croniter(self.cron, datetime.now(zoneinfo.ZoneInfo(self.timezone)))
        first = runs.get_next(float)
        return float(runs.get_next(float) - first)


def next_due(schedule: Schedule, after: float, now: float) -> int:
    """The first run time (UNIX seconds) after `after` that is not in the past: runs missed while nothing could fire
    them are not made up one by one (the run that fires late is the one for them all)."""
    start = max(after, now)
    if schedule.interval is not None:
        steps = max(1, math.floor((start - after) / schedule.interval) + 1)
        return math.ceil(after + steps * schedule.interval)
    assert schedule.cron is not None
    zone = zoneinfo.ZoneInfo(schedule.timezone)
    return math.ceil(croniter(schedule.cron, datetime.fromtimestamp(start, zone)).get_next(float))


class MonitorSpec(BaseModel):
    """What a monitor is: the body of `POST /v1/monitors` (every field may be changed with PATCH)."""

    model_config = ConfigDict(extra="forbid")

    name: MonitorName | None = Field(None, description="A label of yours.")
    request: dict[str, Any] = Field(description="/take parameters of each run (an image format).")
    schedule: Schedule
    webhook_url: str | None = Field(None, description="Told of each run that changed (every run without "
                                                      "only_on_change), and of failures with webhook_errors.")
    webhook_sign: bool = True
    webhook_errors: bool = True
    only_on_change: bool = Field(True, description="Tell the webhook only of runs that changed.")
    change_threshold: ShareValue = Field(0.0, description="A run changed when more than this share (0-1) of "
                                                          "its pixels differ from the last successful run's.")
    threshold: ThresholdValue = DEFAULT_THRESHOLD
    keep_runs: int = Field(100, ge=1, le=KEEP_RUNS_MAX, description="Runs kept in the history (newest first).")
    pause_after_failures: int = Field(5, ge=0, le=1000, description="Pause after this many failed runs in a row "
                                                                    "(0: never).")
    paused: bool = False


@dataclass(frozen=True)
class MonitorOrder:
    """What a monitor's run carries to its worker: whose run it is, and how it is compared (with the monitor's
    last success when the run is done: render.queue.monitors)."""

    monitor: str  # the monitor's id
    due: int  # the run's scheduled time (UNIX seconds)
    threshold: int = DEFAULT_THRESHOLD

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
