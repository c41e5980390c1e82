"""A generic process supervisor: lazy start, restart on crash and after N jobs, a drain before a restart.

It knows nothing of browsers: anything with `start`, `alive` and `stop` can be supervised. The worker's
Chromium (render.browser.chromium) is the one process it runs today.
"""

from __future__ import annotations

import asyncio
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
    """Runs `process`: started on first use, started again when it died, restarted after `restart_after` jobs.
    Jobs that run at once on the process each `hold` it until they `let_go`; a restart that is due (after N jobs, or
    for an unhealthy one) waits for them all (`restart_when_idle`), and no job holds it meanwhile."""

    def __init__(self, process: P, *, restart_after: int) -> None:
        self.process = process
        self.restart_after = restart_after
        self.restarts = 0  # crashes found and restarts made
        self.jobs_since_start = 0
        self._holders = 0  # jobs running on the process now
        self._idle = asyncio.Event()  # no job holds the process
        self._idle.set()
        self._open = asyncio.Event()  # no restart waits for the jobs to end
        self._open.set()
        self._draining: asyncio.Future[None] | None = None  # the restart waiting for the jobs to end
        self._starting = asyncio.Lock()  # jobs asking at once for a process that is not running start one

    async def hold(self) -> None:
        """One more job runs on the process (once a restart waiting for the jobs to end is done)."""
        await self._open.wait()
        self._holders += 1
        self._idle.clear()

    def let_go(self) -> None:
        """A job `hold` counted is done with the process."""
        self._holders = max(0, self._holders - 1)
        if self._holders == 0:
            self._idle.set()

    def draining(self) -> bool:
        """Whether a restart waits for the jobs to end."""
        return self._draining is not None

    async def restart_when_idle(self) -> None:
        """`restart` once no job holds the process; no job holds it meanwhile (one restart for callers at once)."""
        if self._draining is None:
            self._draining = asyncio.ensure_future(self._restart_after_draining())
        await asyncio.shield(self._draining)

    async def _restart_after_draining(self) -> None:
        self._open.clear()
        try:
            await self._idle.wait()
            await self.restart()
        finally:
            self._open.set()
            self._draining = None

    async def ensure(self) -> P:
        """The running process: started when it is not, and again (counted) when it died; once for callers at
        once."""
        if self.process.started() and self.process.alive():
            return self.process
        async with self._starting:
            if self.process.started() and self.process.alive():  # another caller started it meanwhile
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
