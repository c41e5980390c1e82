"""Where the page is scrolled at every instant of a scroll recording: a pure plan of eased motions.

The recorder steps through frames and asks `position(t)` for frame i at t = i / fps, so the motion in
the video is exactly the easing curve, however long each frame takes to capture.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from animate.easing import ease
from animate.options import AnimateOptions


@dataclass(frozen=True)
class Motion:
    """From `start_y` to `end_y` between `start` and `end` (ms), along `easing`."""

    start: float
    end: float
    start_y: float
    end_y: float
    easing: str

    def at(self, t: float) -> float:
        progress = (t - self.start) / (self.end - self.start)
        return self.start_y + (self.end_y - self.start_y) * ease(self.easing, progress)


@dataclass
class Timeline:
    """A sequence of motions with pauses between them; `completes` is when the last one ends (ms)."""

    motions: list[Motion] = field(default_factory=list)
    frozen_after: float | None = None

    @property
    def completes(self) -> float:
        return self.motions[-1].end if self.motions else 0.0

    def position(self, t: float) -> float:
        """Scroll position (CSS px) at `t` ms."""
        if self.frozen_after is not None:
            t = min(t, self.frozen_after)
        y = 0.0
        for motion in self.motions:
            if t < motion.start:
                return y
            if t < motion.end:
                return motion.at(t)
            y = motion.end_y
        return y


def plan(options: AnimateOptions, max_scroll: float, target: float | None = None) -> Timeline:
    """The scroll plan for a page that scrolls `max_scroll` px (to `target` when scrolling till a selector)."""
    bottom = max(0.0, min(max_scroll, target) if target is not None else max_scroll)
    step, pause, easing = options.scroll_duration, options.scroll_delay, options.scroll_easing
    timeline = Timeline(frozen_after=options.scroll_stop_after_duration)
    t = 0.0 if options.scroll_start_immediately else float(options.scroll_start_delay)
    y = 0.0
    stops: list[float] = [0.0]  # where each downward step ended, for scroll_back_algorithm=repeat
    back_at = options.scroll_back_after_duration
    while y < bottom:
        if back_at is not None and t >= back_at:
            break
        if options.scroll_to_end_after is not None and t >= options.scroll_to_end_after:
            timeline.motions.append(Motion(t, t + step, y, bottom, easing))
            t, y = t + step, bottom
            stops.append(y)
            break
        end_y = min(y + options.scroll_by, bottom)
        timeline.motions.append(Motion(t, t + step, y, end_y, easing))
        t, y = t + step, end_y
        stops.append(y)
        if y < bottom:
            t += pause
            if options.scroll_to_end_after is not None and t > options.scroll_to_end_after:
                t = max(t - pause, float(options.scroll_to_end_after))
    if options.scroll_back and y > 0:
        if y >= bottom:  # a pause at the end (an interrupted descent has had its pause already)
            t += pause
        if back_at is not None:
            t = max(t, float(back_at))
        if options.scroll_back_algorithm == "once":
            timeline.motions.append(Motion(t, t + step, y, 0.0, easing))
        else:
            for up_to in reversed(stops[:-1]):
                timeline.motions.append(Motion(t, t + step, y, up_to, easing))
                t, y = t + step + pause, up_to
    return timeline
