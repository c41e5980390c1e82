"""The CPUs a worker's job runs on: batch work taken while the interactive reserve is in force stays off the
reserve's CPUs (CPU affinity of the worker's whole process tree, Chromium's included), and for at most its first
IDLE_SECONDS its browser is lowered too: to the idle scheduling class where the worker may raise it back
(CAP_SYS_NICE), and its session group to nice GROUP_NICE where the kernel groups threads by session (autogroup).
Any other job runs on every CPU, ordinary. The worker's own process always stays ordinary: its heartbeat proves it
alive. docs/architecture.md ("The hand-off") says why each of these is needed and what the kernel allows.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)
# The longest a batch job's browser stays lowered (idle class, group): then it is ordinary again for the rest of the
# job, so a machine kept busy by other work (other programs, another deployment's workers) delays a batch job by this
# at most.
IDLE_SECONDS = 1.0
# The nice of the batch job's browser's session group meanwhile (the lowest: a weight of 15 against an ordinary 1024).
GROUP_NICE = 19
# How long a group's change is retried while the kernel's rate limit refuses it (a change each 0.1 s, machine-wide).
GROUP_RETRY_SECONDS = 0.25


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
    """Moves this process tree between all its CPUs and the batch ones, its Chromium and driver between the ordinary
    and the idle scheduling class where it may, and its browser's session group between nice 0 and GROUP_NICE where
    the kernel groups by session (settings.pin_batch_work)."""

    def __init__(self, reserve_share: float, *, enabled: bool = True) -> None:
        self.all = frozenset(os.sched_getaffinity(0))
        self.batch = batch_cpus(self.all, reserve_share) if enabled else self.all
        # Batch work in the reserve's time yields the CPU to any other work (SCHED_IDLE), where that can be undone.
        self.idle_batch = enabled and reserve_share > 0 and can_raise_scheduling()
        # ... and lowers the session groups below it (Chromium's), where the kernel groups by session.
        self.lower_groups = enabled and reserve_share > 0 and groups_by_session()
        self._lowered = False  # those groups are at GROUP_NICE now
        self._cpus = self.all  # where the tree runs now
        self._idle = False  # its Chromium and driver are in the idle class now
        self._lock = threading.Lock()  # for_job and the lift (a timer's thread) walk the tree one at a time
        self._lift: threading.Timer | None = None
        self.moves = 0  # times the tree was moved (for the tests)

    def for_job(self, *, reserved_batch: bool) -> None:
        """Before a job: the batch CPUs (and the idle class and lowered group, for at most IDLE_SECONDS) for a batch
        job taken while the reserve is in force, else all CPUs, the ordinary class and nice 0."""
        with self._lock:
            if self._lift is not None:
                self._lift.cancel()
                self._lift = None
            idle = reserved_batch and (self.idle_batch or self.lower_groups)
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
        """Every thread of the tree to `cpus`, and its Chromium and driver to the idle class and its browser's session
        group to GROUP_NICE or back, when any of these changes (the walk reads every process's parent from /proc)."""
        lower = idle and self.lower_groups
        if cpus == self._cpus and idle == self._idle and lower == self._lowered:
            return
        classes = idle != self._idle and self.idle_batch
        self._cpus, self._idle = cpus, idle
        self.moves += 1
        policy = os.SCHED_IDLE if idle else os.SCHED_OTHER
        own = os.getpid()
        tree = process_tree(own)
        for pid in tree:
            with contextlib.suppress(OSError):  # a process or thread that has just ended
                for task in Path(f"/proc/{pid}/task").iterdir():
                    with contextlib.suppress(OSError, ValueError):
                        os.sched_setaffinity(int(task.name), cpus)
                        if pid != own and classes:
                            os.sched_setscheduler(int(task.name), policy, os.sched_param(0))
        if lower != self._lowered:
            if set_group_nice(own, tree, GROUP_NICE if lower else 0, retry_seconds=GROUP_RETRY_SECONDS):
                self._lowered = lower
            else:
                log.warning("the kernel refused to %s the browser's session group (at most ten changes a second on "
                            "this machine); %s", "lower" if lower else "raise",
                            "this batch job competes as an equal" if lower else "it is tried again before the next job")
        log.debug("worker on CPUs %s, its browser %s", sorted(cpus), "idle" if idle else "ordinary")


def groups_by_session() -> bool:
    """Whether the kernel groups ordinary threads by session (autogroup) and says so."""
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1" and \
            Path("/proc/self/autogroup").exists()
    except OSError:
        return False


def session_group(pid: int) -> tuple[str, int] | None:
    """The session group (autogroup) `pid` is in, e.g. "/autogroup-6172", and its nice; None for the group of the
    first session (init's, and of every process that never started a session of its own, as a container's or a CI
    runner's may not), which the kernel shows as nothing and would not renice."""
    words = Path(f"/proc/{pid}/autogroup").read_text().split()
    if not words:
        return None
    group, _, nice = words
    return group, int(nice)


def set_group_nice(own: int, tree: list[int], nice: int, *, retry_seconds: float) -> bool:
    """Every session group of `tree` but `own`'s to `nice`, retrying for `retry_seconds` while the kernel's rate limit
    refuses (EAGAIN); whether none was refused. A group at `nice` already is not written (each write takes one of the
    machine's ten a second), and a process that has just ended is passed over."""
    try:
        own_group = session_group(own)
    except (OSError, ValueError):
        return False
    done = {own_group[0]} if own_group is not None else set()
    deadline = time.monotonic() + retry_seconds
    for pid in tree:
        try:
            found = session_group(pid)
        except (OSError, ValueError):
            continue
        if found is None:  # the first session's group: the worker's own, or one the kernel would not change
            continue
        group, now = found
        if group in done or now == nice:
            done.add(group)
            continue
        while True:
            try:
                Path(f"/proc/{pid}/autogroup").write_text(str(nice))
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.02)
            except OSError:
                break  # ended meanwhile
        done.add(group)
    return True
