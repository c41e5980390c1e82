"""A generic process supervisor: lazy start, restart on crash and after N jobs, a drain before a restart.

It knows nothing of browsers: anything with `start`, `alive` and `stop` can be supervised. The worker's
Chromium (render.browser.chromium) is the one process it runs today.
"""

from __future__ import annotations

import logging
from typing import Generic, Protocol, TypeVar

log = logging.getLogger(__name__)


class Process(Protocol):
    """What a supervisor needs of the process it runs."""

    name: str

    async def start(self) -> None: ...

    def alive(self) -> bool: ...

    def started(self) -> bool: ...

    async def stop(self) -> None: ...


P = TypeVar("P", bound=Process)


class Supervisor(Generic[P]):
    """Runs `process`: started on first use, started again when it died, restarted after `restart_after` jobs."""

    def __init__(self, process: P, *, restart_after: int) -> None:
        self.process = process
        self.restart_after = restart_after
        self.restarts = 0  # crashes found and restarts made
        self.jobs_since_start = 0

    async def ensure(self) -> P:
        """The running process: started when it is not, and again (counted) when it died."""
        if self.process.started() and self.process.alive():
            return self.process
        if self.process.started():
            log.warning("%s disconnected; restarting", self.process.name)
            self.restarts += 1
        await self.process.start()
        self.jobs_since_start = 0
        return self.process

    def crashed(self) -> bool:
        """Whether the process was started and has died since."""
        return self.process.started() and not self.process.alive()

    def job_done(self, *, healthy: bool = True) -> bool:
        """Count a finished job; True when the process is due for a restart (after N jobs, or unhealthy)."""
        self.jobs_since_start += 1
        return not healthy or self.jobs_since_start >= self.restart_after

    async def restart(self) -> None:
        """Stop the process now (counted when it ran); the next `ensure` starts a new one."""
        if self.process.started():
            self.restarts += 1
            await self.process.stop()
