"""The CPUs a worker's job runs on: batch work stays off the interactive reserve's while interactive work comes, and
where the worker may, runs only on the CPU time interactive work leaves.

The interactive reserve (SCREENSHOT_INTERACTIVE_RESERVE) keeps workers free for captures a client waits for; on a
machine whose workers share its CPUs, a batch job rendering beside such a capture still takes its share of every
CPU. While the reserve is in force (render.queue.lanes says so of the batch job it hands out), a worker renders a
batch job on all the machine's CPUs but the reserve's share of them (one at least, never all), and any other job on
all of them. It sets the CPU affinity of every thread of its process tree (its Python, Playwright's driver,
Chromium and its renderers; the processes they start inherit it), only when the set changes: affinity, unlike a
priority, needs no privilege to narrow and widen again. A move reads every process's parent from /proc (1.2 ms
with 66 processes here, more on a host with many), and happens only when a worker goes from batch work with the
reserve in force to other work or back.

Affinity alone leaves the batch CPUs shared: a capture uses more than one CPU (Chromium's browser process, its
compositor and renderer, the driver), and what it runs on the batch CPUs there competes with batch work as an equal.
Where the worker may raise a thread's scheduling back (CAP_SYS_NICE: root outside a container, or a container given
SYS_NICE; found once, on a thread of its own), batch work in the reserve's time also moves its Chromium and driver
to the idle scheduling class (SCHED_IDLE), which runs only when no ordinary thread wants the CPU, and back for any
other job. Chromium's own thread priorities (nice values) do not lift a thread out of that class. The worker's own
process stays in the ordinary class: its heartbeat says it is alive, and must never wait behind other work.
Without the privilege the class would be a one-way move (an unprivileged thread may lower its scheduling but not
raise it back), so affinity alone is used. A Chromium started anew during such work (after a crash) inherits the
worker's affinity but its ordinary class, until the worker's next move. The idle class gives way to *any* ordinary
thread, not only to interactive work: on a machine kept busy by something else, a batch job would get no CPU at all.
So it is kept for at most IDLE_SECONDS of each job (a simple page's batch job takes a fraction of that), after which
the job's browser is ordinary again, on the batch CPUs still: batch work is delayed by that much at most.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
from pathlib import Path

log = logging.getLogger(__name__)
# The longest a batch job's browser stays in the idle class: then it is ordinary again for the rest of the job, so a
# machine kept busy by other work (other programs, another deployment's workers) delays a batch job by this at most.
IDLE_SECONDS = 1.0


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


def can_raise_scheduling() -> bool:
    """Whether this process may move a thread back from the idle scheduling class to the ordinary one: tried on a
    thread started for it (which ends in whichever class it was left)."""
    answer: list[bool] = []

    def attempt() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            answer.append(True)
        except (OSError, AttributeError):
            answer.append(False)

    trial = threading.Thread(target=attempt, name="scheduling-trial")
    trial.start()
    trial.join()
    return answer == [True]


class CpuPinning:
    """Moves this process tree between all its CPUs and the batch ones, and its Chromium and driver between the
    ordinary and the idle scheduling class where it may (settings.pin_batch_work)."""

    def __init__(self, reserve_share: float, *, enabled: bool = True) -> None:
        self.all = frozenset(os.sched_getaffinity(0))
        self.batch = batch_cpus(self.all, reserve_share) if enabled else self.all
        # Batch work in the reserve's time yields the CPU to any other work (SCHED_IDLE), where that can be undone.
        self.idle_batch = enabled and reserve_share > 0 and can_raise_scheduling()
        self._cpus = self.all  # where the tree runs now
        self._idle = False  # its Chromium and driver are in the idle class now
        self._lock = threading.Lock()  # for_job and the lift (a timer's thread) walk the tree one at a time
        self._lift: threading.Timer | None = None
        self.moves = 0  # times the tree was moved (for the tests)

    def for_job(self, *, reserved_batch: bool) -> None:
        """Before a job: the batch CPUs (and the idle class, for at most IDLE_SECONDS) for a batch job taken while
        the reserve is in force, else all CPUs and the ordinary class."""
        with self._lock:
            if self._lift is not None:
                self._lift.cancel()
                self._lift = None
            idle = reserved_batch and self.idle_batch
            self._move(self.batch if reserved_batch else self.all, idle)
            if idle:
                self._lift = threading.Timer(IDLE_SECONDS, self._lift_now)
                self._lift.daemon = True
                self._lift.start()

    def _lift_now(self) -> None:
        """The batch job still runs after IDLE_SECONDS: its browser back in the ordinary class (its CPUs stay)."""
        with self._lock:
            if threading.current_thread() is self._lift:  # not cancelled nor replaced by a job since
                self._move(self._cpus, False)
                self._lift = None

    def _move(self, cpus: frozenset[int], idle: bool) -> None:
        """Every thread of the tree to `cpus`, and its Chromium and driver to the idle class or back, when either
        changes (the walk reads every process's parent from /proc)."""
        if cpus == self._cpus and idle == self._idle:
            return
        classes = idle != self._idle
        self._cpus, self._idle = cpus, idle
        self.moves += 1
        policy = os.SCHED_IDLE if idle else os.SCHED_OTHER
        own = os.getpid()
        for pid in process_tree(own):
            with contextlib.suppress(OSError):  # a process or thread that has just ended
                for task in Path(f"/proc/{pid}/task").iterdir():
                    with contextlib.suppress(OSError, ValueError):
                        os.sched_setaffinity(int(task.name), cpus)
                        if pid != own and classes:
                            os.sched_setscheduler(int(task.name), policy, os.sched_param(0))
        log.debug("worker on CPUs %s, its browser %s", sorted(cpus), "idle" if idle else "ordinary")
