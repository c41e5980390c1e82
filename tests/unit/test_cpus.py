"""Which CPUs batch work keeps to while the interactive reserve is in force (render/worker/cpus.py), that the
move reaches every thread of the process tree, that its browser yields the CPU (the idle scheduling class) only
where the worker may raise it back, and that its browser's session group is lowered and raised back, privileged or
not, where the kernel groups by session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from render.worker import cpus
from render.worker.cpus import CpuPinning, batch_cpus, can_raise_scheduling, groups_by_session

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("cpus", "share", "batch"), [
    ({0}, 0.25, {0}),  # one CPU: nothing to keep apart
    ({0, 1}, 0.25, {1}),  # the default on 2 CPUs: one each
    ({0, 1, 2, 3}, 0.25, {1, 2, 3}),
    ({0, 1, 2, 3, 4, 5, 6, 7}, 0.5, {4, 5, 6, 7}),
    ({2, 5, 7}, 0.9, {7}),  # never all of them: batch keeps one
    ({0, 1, 2, 3}, 0.0, {0, 1, 2, 3}),  # no reserve
])
def test_batch_work_keeps_off_the_reserve_s_share_of_the_cpus(cpus: set[int], share: float, batch: set[int]) -> None:
    assert batch_cpus(frozenset(cpus), share) == frozenset(batch)


def _allowed(pid: int) -> list[str]:
    """Cpus_allowed_list of every thread of `pid`."""
    return [(task / "status").read_text().split("Cpus_allowed_list:")[1].split()[0]
            for task in Path(f"/proc/{pid}/task").iterdir()]


def _classes(pid: int) -> set[int]:
    """The scheduling policy of every thread of `pid`."""
    return {os.sched_getscheduler(int(task.name)) for task in Path(f"/proc/{pid}/task").iterdir()}


def _group_nice(pid: int) -> int | None:
    """The nice of `pid`'s session group, from /proc/<pid>/autogroup ("/autogroup-6172 nice 19"); None in the first
    session's group, which the kernel shows as nothing (a test run started without a session of its own, as in CI)."""
    words = Path(f"/proc/{pid}/autogroup").read_text().split()
    return int(words[-1]) if words else None


def _child(*, threads: int = 0, own_session: bool = False) -> subprocess.Popen[str]:
    """A child standing for Chromium: with threads of its own, as its processes have, and in a session of its own, as
    Playwright starts it."""
    script = ("import threading, time\n"
              f"for _ in range({threads}): threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
              "print('up', flush=True); time.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             start_new_session=own_session)
    assert child.stdout is not None and child.stdout.readline().strip() == "up"
    return child


def _as_a_worker(scenario: Callable[[], None]) -> None:
    """Runs `scenario` in a process of its own, which stands for the worker: CpuPinning moves the tree below the
    process it runs in, and this test run's own tree holds the services other tests started (a Redis, workers, each
    in a session of its own), which a scenario run here would move and lower too. It runs without CAP_SYS_ADMIN,
    which lifts the kernel's limit of ten group changes a second for the whole machine (a worker in a container has
    no such privilege); its changes are retried for up to 10 s, as the machine's other workers (the other share's)
    take turns meanwhile. A failed assertion in it fails the test with its traceback."""
    command = [sys.executable, "-c", f"from tests.unit.test_cpus import _run; _run({scenario.__name__!r})"]
    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0 and setpriv is not None:
        command = [setpriv, "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", *command]
    answer = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert answer.returncode == 0, answer.stderr


def _run(scenario: str) -> None:
    """A scenario of this module, in the process `_as_a_worker` started."""
    cpus.GROUP_RETRY_SECONDS = 10.0
    globals()[scenario]()


def _tree_moves_and_comes_back() -> None:
    before = os.sched_getaffinity(0)
    child = _child(threads=3)
    try:
        pinning = CpuPinning(0.25)
        batch = ",".join(str(cpu) for cpu in sorted(pinning.batch))
        pinning.for_job(reserved_batch=True)
        assert set(_allowed(child.pid)) == {batch} and set(_allowed(os.getpid())) == {batch}
        # The browser's threads yield the CPU where they can be raised back; the worker's own never do.
        idle = {os.SCHED_IDLE} if pinning.idle_batch else {os.SCHED_OTHER}
        assert _classes(child.pid) == idle and _classes(os.getpid()) == {os.SCHED_OTHER}
        pinning.for_job(reserved_batch=True)  # already there: nothing moved
        assert pinning.moves == 1
        pinning.for_job(reserved_batch=False)
        assert os.sched_getaffinity(child.pid) == before and os.sched_getaffinity(0) == before
        assert _classes(child.pid) == {os.SCHED_OTHER}
        assert len(set(_allowed(child.pid))) == 1 and pinning.moves == 2
        assert not CpuPinning(0.25, enabled=False).batch < pinning.all  # off: batch on every CPU
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs or more")
def test_the_whole_process_tree_moves_and_comes_back() -> None:
    _as_a_worker(_tree_moves_and_comes_back)


@pytest.mark.skipif(not can_raise_scheduling(), reason="needs CAP_SYS_NICE (root) to see the idle class used")
def test_a_worker_that_may_raise_its_threads_back_yields_the_cpu_in_batch_work() -> None:
    assert CpuPinning(0.25).idle_batch
    assert not CpuPinning(0.0).idle_batch and not CpuPinning(0.25, enabled=False).idle_batch


def _ordinary_again_after_the_idle_time() -> None:
    cpus.IDLE_SECONDS = 0.2
    before = os.sched_getaffinity(0)
    child = _child()
    try:
        pinning = CpuPinning(0.25)
        pinning.for_job(reserved_batch=True)
        assert _classes(child.pid) == {os.SCHED_IDLE}
        deadline = time.monotonic() + 10
        while _classes(child.pid) != {os.SCHED_OTHER} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _classes(child.pid) == {os.SCHED_OTHER}, "the browser stayed in the idle class"
        assert os.sched_getaffinity(child.pid) == pinning.batch  # still off the reserve's CPUs
        pinning.for_job(reserved_batch=True)  # the next batch job yields again
        assert _classes(child.pid) == {os.SCHED_IDLE}
        pinning.for_job(reserved_batch=False)
        assert _classes(child.pid) == {os.SCHED_OTHER} and os.sched_getaffinity(child.pid) == before
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not can_raise_scheduling(), reason="needs CAP_SYS_NICE (root) to see the idle class used")
def test_a_batch_job_s_browser_is_ordinary_again_after_its_idle_time() -> None:
    """The idle class yields to any ordinary work, which on a busy machine may never end: it is held for
    IDLE_SECONDS of a job at most, then the job runs on in the ordinary class (on the batch CPUs still)."""
    _as_a_worker(_ordinary_again_after_the_idle_time)


def test_without_the_privilege_batch_work_keeps_the_ordinary_class() -> None:
    """An unprivileged thread may enter the idle class but never leave it: such a worker must not use it."""
    command = [sys.executable, "-c", "from render.worker.cpus import CpuPinning; print(CpuPinning(0.25).idle_batch)"]
    if can_raise_scheduling():  # privileged here: the worker run without CAP_SYS_NICE, as in a container
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("setpriv (util-linux) is needed to drop CAP_SYS_NICE")
        command = [setpriv, "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", *command]
    answer = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    assert answer.stdout.strip() == "False", answer.stderr


def _group_lowered_and_raised_back() -> None:
    cpus.IDLE_SECONDS = 0.3
    child = _child(own_session=True)
    own = _group_nice(os.getpid())
    try:
        pinning = CpuPinning(0.25)
        assert pinning.lower_groups
        pinning.for_job(reserved_batch=True)
        assert _group_nice(child.pid) == cpus.GROUP_NICE and _group_nice(os.getpid()) == own  # never the worker's own
        deadline = time.monotonic() + 20
        while _group_nice(child.pid) != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _group_nice(child.pid) == 0, "the browser's group stayed lowered past the idle time"
        pinning.for_job(reserved_batch=True)
        assert _group_nice(child.pid) == cpus.GROUP_NICE
        pinning.for_job(reserved_batch=False)  # at once, within the rate limit: retried until it is taken
        assert _group_nice(child.pid) == 0
        assert not CpuPinning(0.0).lower_groups and not CpuPinning(0.25, enabled=False).lower_groups
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not groups_by_session(), reason="the kernel does not group threads by session here")
def test_a_batch_job_s_browser_session_group_is_lowered_and_raised_back() -> None:
    """A class does not reach across session groups, each of which gets an equal share of a CPU: the browser's
    group is lowered for a batch job's idle time, and is at nice 0 again after it and for any other job."""
    _as_a_worker(_group_lowered_and_raised_back)


def _refused_raise_tried_again() -> None:
    calls: list[int] = []
    answers = iter([True, False, True])

    def set_nice(own: int, tree: list[int], nice: int, *, retry_seconds: float) -> bool:
        calls.append(nice)
        return next(answers)

    cpus.set_group_nice = set_nice  # type: ignore[assignment]
    cpus.groups_by_session = lambda: True
    pinning = CpuPinning(0.25)
    pinning.for_job(reserved_batch=True)
    pinning.for_job(reserved_batch=False)  # refused
    pinning.for_job(reserved_batch=False)  # tried again
    pinning.for_job(reserved_batch=False)  # done: nothing more
    assert calls == [cpus.GROUP_NICE, 0, 0]


def test_a_group_the_kernel_refused_to_raise_is_raised_before_the_next_job() -> None:
    """The kernel takes ten group changes a second for the whole machine; a raise it refused past the retries is
    tried again before the next job rather than left lowered."""
    _as_a_worker(_refused_raise_tried_again)


def _unchanged_group_is_not_written() -> None:
    child = _child(own_session=True)
    try:
        tree = [os.getpid(), child.pid]
        assert cpus.set_group_nice(os.getpid(), tree, 0, retry_seconds=0)  # at 0 already: nothing written
        # One change takes the kernel's turn for a tenth of a second: a second one at once would be refused, so
        # the unchanged one above cost none.
        assert cpus.set_group_nice(os.getpid(), tree, cpus.GROUP_NICE, retry_seconds=10)
        assert cpus.set_group_nice(os.getpid(), tree, cpus.GROUP_NICE, retry_seconds=0)  # at 19 already
        assert _group_nice(child.pid) == cpus.GROUP_NICE
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not groups_by_session(), reason="the kernel does not group threads by session here")
def test_a_group_already_at_its_nice_is_left_alone() -> None:
    """A write of the nice a group already has would take one of the machine's ten changes a second from the
    workers that need one: it is not made."""
    _as_a_worker(_unchanged_group_is_not_written)


def _worker_in_the_first_session() -> None:
    # The kernel shows the first session's group as nothing; a process here cannot join that group, so the worker's
    # reading of its own is made to say so. The browser's group and every write to it are real.
    real = cpus.session_group
    cpus.session_group = lambda pid: None if pid == os.getpid() else real(pid)  # type: ignore[assignment]
    child = _child(own_session=True)
    try:
        pinning = CpuPinning(0.25)
        pinning.for_job(reserved_batch=True)
        assert _group_nice(child.pid) == cpus.GROUP_NICE and pinning.moves == 1
        pinning.for_job(reserved_batch=True)  # lowered already: nothing to do again
        assert pinning.moves == 1
        pinning.for_job(reserved_batch=False)
        assert _group_nice(child.pid) == 0 and pinning.moves == 2
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not groups_by_session(), reason="the kernel does not group threads by session here")
def test_a_worker_in_the_first_session_s_group_still_lowers_its_browser_s() -> None:
    """A worker started without a session of its own (a container's first process, a CI runner's job) is in the
    group the kernel shows as nothing: its browser's group, in a session of its own, is lowered and raised all the
    same."""
    _as_a_worker(_worker_in_the_first_session)


@pytest.mark.skipif(not groups_by_session(), reason="the kernel does not group threads by session here")
def test_an_unprivileged_worker_lowers_and_raises_the_group_too() -> None:
    """A group's nice at 0 or above needs no privilege, unlike the idle class: a worker without CAP_SYS_NICE (as in a
    container) still lowers its browser's group and raises it back."""
    script = ("import subprocess, sys, time\n"
              "from pathlib import Path\n"
              "from render.worker import cpus\n"
              "cpus.GROUP_RETRY_SECONDS = 10.0  # the rest of the machine may take the kernel's turns meanwhile\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'],\n"
              "                         start_new_session=True)\n"
              "time.sleep(0.2)\n"
              "nice = lambda: Path(f'/proc/{child.pid}/autogroup').read_text().split()[-1]\n"
              "pinning = cpus.CpuPinning(0.25)\n"
              "pinning.for_job(reserved_batch=True)\n"
              "lowered = nice()\n"
              "pinning.for_job(reserved_batch=False)\n"
              "print(pinning.idle_batch, lowered, nice())\n"
              "child.kill()\n")
    command = [sys.executable, "-c", script]
    if can_raise_scheduling():
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("setpriv (util-linux) is needed to drop CAP_SYS_NICE")
        command = [setpriv, "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", *command]
    answer = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT, timeout=60)
    assert answer.stdout.split() == ["False", str(cpus.GROUP_NICE), "0"], answer.stderr
