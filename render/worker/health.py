"""Whether this worker can render, told truthfully: a worker whose Chromium cannot start, or keeps dying,
is unhealthy. It takes no job, /readyz does not count it, its container's health check says why, and it tries
again (every PROBE_FIRST_SECONDS at first, backing off to PROBE_MOST_SECONDS) until a tab opens and runs a script.
"""

from __future__ import annotations

import logging
import time
from collections import deque

log = logging.getLogger(__name__)
PROBE_FIRST_SECONDS = 2.0
PROBE_MOST_SECONDS = 30.0
DEATHS_IN_ROW = 3  # Chromium lost under this many jobs ...
DEATHS_WITHIN_SECONDS = 60.0  # ... within this long: it keeps dying
FIX = ("In a container Chromium's sandbox needs user namespaces: run the worker with deploy/seccomp-chromium.json "
       "(Docker or Podman: --security-opt seccomp=deploy/seccomp-chromium.json; Kubernetes: the manifests' "
       "seccompProfile), or see docs/operating.md, Deploying; check SCREENSHOT_CHROMIUM_PATH and the worker's "
       "memory limit.")


def cause(error: BaseException) -> str:
    """The line of an error that says what went wrong: the browser's own first log line when Playwright gives
    its logs ("Chromium sandboxing failed!"), else the error's first line."""
    lines = [line.strip() for line in str(error).splitlines()]
    if "Browser logs:" in lines:
        logged = lines[lines.index("Browser logs:") + 1:]
        found = next((line for line in logged if line and not line.startswith(("=", "Call log:"))), None)
        if found:
            return found[:300]
    return (lines[0][:300] if lines and lines[0] else type(error).__name__).rstrip(".")


class BrowserHealth:
    """Why the worker cannot render now (None: it can), and when to try again."""

    def __init__(self) -> None:
        self.reason: str | None = "Chromium has not started yet"
        self._next_probe = 0.0  # time.monotonic(); the first probe at once
        self._wait = PROBE_FIRST_SECONDS
        self._deaths: deque[float] = deque(maxlen=DEATHS_IN_ROW)
        self._last_lost: object | None = None  # the browser whose loss was counted last

    def probe_due(self) -> bool:
        return self.reason is not None and time.monotonic() >= self._next_probe

    def failed(self, what: str, error: BaseException) -> None:
        """A probe failed: unhealthy, the next probe later."""
        reason = f"{what}: {cause(error)}. {FIX}"
        if reason != self.reason:
            log.error("worker cannot render: %s Taking no job; trying again in %.0f s.", reason, self._wait)
        self.reason = reason
        self._next_probe = time.monotonic() + self._wait
        self._wait = min(self._wait * 2, PROBE_MOST_SECONDS)

    def recovered(self) -> None:
        if self.reason is not None and not self.reason.startswith("Chromium has not started"):
            log.warning("worker can render again: taking jobs")
        self.reason = None
        self._wait = PROBE_FIRST_SECONDS

    def browser_died(self, browser: object | None = None) -> None:
        """Chromium (`browser`, when known) was lost under a job; several times in a short while, and the worker is
        unhealthy. One browser lost under several job slots' jobs counts once."""
        if browser is not None:
            if browser is self._last_lost:
                return
            self._last_lost = browser
        now = time.monotonic()
        self._deaths.append(now)
        if len(self._deaths) == DEATHS_IN_ROW and now - self._deaths[0] <= DEATHS_WITHIN_SECONDS:
            self._deaths.clear()
            self.failed("Chromium keeps dying", RuntimeError(
                f"lost under {DEATHS_IN_ROW} jobs within {DEATHS_WITHIN_SECONDS:.0f} s"))
