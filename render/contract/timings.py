"""Where a capture's time went: its stages, what the capture waited for, and the W3C `Server-Timing` header.

A worker times its stages with a `Stopwatch` (the capture pipeline, its page steps, the finishing); the result
carries them over the queue as milliseconds (`JobResult.timings`); the API adds the time the job waited in
its lane and answers them as `Server-Timing` on every capture and, with `metadata_timings`, as
`metadata.timings`. Pure module: the API imports it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

# Each stage once, in the order a capture goes through them, with what Server-Timing's `desc` says of it (no
# commas or quotes: a header parser that splits at commas reads it whole).
STAGES: dict[str, str] = {
    "queue": "waiting for a worker",
    "context": "the browser page for the job",
    "navigation": "loading the page to its first awaited event",
    "waits": "network idle / a page hiding itself / wait_for_selector / wait_for_expression / delay",
    "preparation": "emulation / blocking / styles / scripts / clicks / checks",
    "capture": "Chromium drawing the output",
    "encode": "converting and encoding the image",
    "metadata": "reading what metadata_* asked of the page",
    "store": "storing the results",
}
# What the capture fired on: the last wait it finished, best_attempt when one ran out; "cache" for an answer
# served from the cache (nothing was captured for it).
FIRED_ON = ("load", "domcontentloaded", "network_idle", "selector", "expression", "delay", "best_attempt", "cache")
CACHE_HIT = {"stages_ms": {}, "fired": "cache", "timed_out": []}


# Told of each stage a capture enters, when set (the worker, for an async job: its record says what the job is
# doing, which GET /jobs/{reference} and the MCP tools' progress show).
stage_listener: ContextVar[Callable[[str], None] | None] = ContextVar("stage_listener", default=None)


class Stopwatch:
    """Sums the time spent in each stage of one capture and notes what it waited for."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.fired = "load"
        self.timed_out: list[str] = []  # waits that ran out, under best_attempt

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        assert name in STAGES, name
        listener = stage_listener.get()
        if listener is not None:
            listener(name)
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - started)

    def copy(self) -> Stopwatch:
        """A stopwatch that goes on from this one's figures (one page, several outputs)."""
        twin = Stopwatch()
        twin.seconds, twin.fired, twin.timed_out = dict(self.seconds), self.fired, list(self.timed_out)
        return twin

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def ran_out(self, wait: str) -> None:
        """`wait` (a parameter's name) ran out and the capture goes on (best_attempt)."""
        self.timed_out.append(wait)
        self.fired = "best_attempt"

    def report(self) -> dict[str, Any]:
        """The stages in milliseconds, what fired the capture, and the waits that ran out."""
        stages = {name: round(self.seconds[name] * 1000, 1) for name in STAGES if name in self.seconds}
        return {"stages_ms": stages, "fired": self.fired, "timed_out": list(self.timed_out)}


def server_timing(timings: dict[str, Any]) -> str:
    """The `Server-Timing` header's value: each stage's duration with its description, and what fired the
    capture (a metric with only a description, as the W3C syntax allows)."""
    stages = timings.get("stages_ms", {})
    metrics = [f'{name};dur={stages[name]};desc="{STAGES[name]}"' for name in STAGES if name in stages]
    fired = timings.get("fired")
    if fired in FIRED_ON:
        metrics.append(f'fired;desc="{fired}"')
    return ", ".join(metrics)
