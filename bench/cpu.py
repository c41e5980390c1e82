"""CPU time by part of the service: Chromium, the workers' Python, Playwright's Node driver, the API,
the webhook deliverer and Redis, read from /proc around a stretch of load and divided by the captures made.

A process's CPU is its own time plus that of the children it has reaped (so renderers Chromium closed during
the load are counted, in their browser's row); a process that ended unreaped is missed (none does here)."""

from __future__ import annotations

import contextlib
import os
from collections import Counter

from tests.support.servers import cpu_seconds as seconds
from tests.support.servers import process_tree

PARTS = ("chromium", "worker", "driver", "api", "deliverer", "redis")


def _program(pid: int) -> str:
    with contextlib.suppress(OSError):
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    return ""


def cpu_seconds(roles: dict[str, int], redis_pid: int | None) -> Counter[str]:
    """CPU seconds so far of each part (PARTS), from the service's processes by role (`api`, `webhooks`,
    `worker0`, ...) and the Redis server's process."""
    spent: Counter[str] = Counter()
    for role, root in roles.items():
        for pid in process_tree(root):
            if role.startswith("worker"):
                program = _program(pid)
                part = "driver" if program == "node" else "worker" if pid == root else "chromium"
            else:
                part = "deliverer" if role == "webhooks" else "api"
            spent[part] += seconds([pid])
    if redis_pid is not None:
        spent["redis"] += seconds([redis_pid])
    return spent


def per_capture_ms(spent: Counter[str], captures: int) -> dict[str, float]:
    """Milliseconds of CPU per capture, by part, and their total."""
    found = {part: spent[part] * 1000 / captures for part in PARTS}
    found["total"] = sum(found.values())
    return found
