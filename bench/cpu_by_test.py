"""Where `make test`'s CPU goes, by test: a pytest plugin that reads, around each test (its setup, call and
teardown), the CPU time of the pytest process's whole tree from /proc (the services, Chromium and the background
runs it started), and writes it with the wall time to var/test-cpu-<worker>.json (one file per pytest-xdist
worker, `all` without xdist).

    PYTHONPATH=. PYTEST_ADDOPTS="-p bench.cpu_by_test" make test
    .venv/bin/python -m bench.cpu_by_test          # the files and tests that took the most CPU

A process's time counts its own and that of its children it has reaped (cutime, cstime), so a test's figure holds
what ended during it. Work started with the run (tests/support/background.py: the contract run, the MCP
scenario) belongs to xdist's controller, which runs no test, and so counts nowhere; a module's fixtures count to
its first and last tests.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import cpu_seconds, process_tree

OUT = Path(__file__).resolve().parents[1] / "var"
_taken: dict[str, tuple[float, float]] = {}  # test -> (CPU seconds, wall seconds)


def tree_cpu(root: int) -> float:
    """The CPU seconds of `root` and every process below it, with the children each has reaped."""
    return cpu_seconds(process_tree(root))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    cpu, wall = tree_cpu(os.getpid()), time.monotonic()
    yield
    _taken[item.nodeid] = (tree_cpu(os.getpid()) - cpu, time.monotonic() - wall)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _taken:  # not xdist's controller
        OUT.mkdir(exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "all")
        (OUT / f"test-cpu-{worker}.json").write_text(json.dumps(_taken, indent=1) + "\n")


def main() -> int:
    taken: dict[str, tuple[float, float]] = {}
    for path in sorted(OUT.glob("test-cpu-*.json")):
        taken.update(json.loads(path.read_text()))
    if not taken:
        sys.stderr.write(__doc__ + "\n")
        return 2
    files: Counter[str] = Counter()
    for test, (cpu, _) in taken.items():
        files[test.split("::", 1)[0]] += cpu
    print(f"{len(taken)} tests, {sum(files.values()):.0f} CPU s\n\nfiles:")
    for path, cpu in files.most_common(25):
        print(f"  {cpu:7.1f} s  {path}")
    print("\ntests:")
    for test, (cpu, wall) in sorted(taken.items(), key=lambda entry: -entry[1][0])[:25]:
        print(f"  {cpu:7.1f} s CPU {wall:7.1f} s wall  {test}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
