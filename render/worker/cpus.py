"""The CPUs a worker's job runs on: batch work stays off the interactive reserve's while interactive work comes.

The interactive reserve (SCREENSHOT_INTERACTIVE_RESERVE) keeps workers free for captures a client waits for; on a
machine whose workers share its CPUs, a batch job rendering beside such a capture still takes its share of every
CPU. While the reserve is in force (render.queue.lanes says so of the batch job it hands out), a worker renders a
batch job on all the machine's CPUs but the reserve's share of them (one at least, never all), and any other job on
all of them. It sets the CPU affinity of every thread of its process tree (its Python, Playwright's driver,
Chromium and its renderers; the processes they start inherit it), only when the set changes: affinity, unlike a
priority, needs no privilege to narrow and widen again. A move reads every process's parent from /proc (1.2 ms
with 66 processes here, more on a host with many), and happens only when a worker goes from batch work with the
reserve in force to other work or back.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from pathlib import Path

log = logging.getLogger(__name__)


def batch_cpus(allowed: frozenset[int], reserve_share: float) -> frozenset[int]:
    """The CPUs of `allowed` batch work may use while the reserve is in force: all but the first
    `reserve_share` of them (one at least, leaving one at least); all of them on a single CPU."""
    if len(allowed) < 2 or reserve_share <= 0:
        return allowed
    kept = min(max(1, math.floor(len(allowed) * reserve_share)), len(allowed) - 1)
    return frozenset(sorted(allowed)[kept:])


def process_tree(root: int) -> list[int]:
    """`root` and every process below it, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [root], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class CpuPinning:
    """Moves this process tree between all its CPUs and the batch ones (settings.pin_batch_work)."""

    def __init__(self, reserve_share: float, *, enabled: bool = True) -> None:
        self.all = frozenset(os.sched_getaffinity(0))
        self.batch = batch_cpus(self.all, reserve_share) if enabled else self.all
        self._now = self.all
        self.moves = 0  # times the tree was moved (for the tests)

    def for_job(self, *, reserved_batch: bool) -> None:
        """Before a job: the batch CPUs for a batch job taken while the reserve is in force, else all."""
        wanted = self.batch if reserved_batch else self.all
        if wanted == self._now:
            return
        self._now = wanted
        self.moves += 1
        for pid in process_tree(os.getpid()):
            with contextlib.suppress(OSError):  # a process or thread that has just ended
                for task in Path(f"/proc/{pid}/task").iterdir():
                    with contextlib.suppress(OSError, ValueError):
                        os.sched_setaffinity(int(task.name), wanted)
        log.debug("worker on CPUs %s", sorted(wanted))
