"""`make test` runs the suite as two pytest processes at once, each a share of its files (SCREENSHOT_TEST_SHARD,
"1/2" and "2/2"): the suite mostly waits on pages and processes (one process kept about 0.8 of this machine's 2
cores busy), so two overlap well.

Files are shared out by how long each took in a whole run (tests/durations.json: seconds per file, setup and
teardown included), the longest first, each to the share with the least so far; a file not in it counts as its
number of tests times the median seconds per test. Each share is a session of its own (its Redis, site and
service), so a file never straddles two: its module fixtures start once. tests/e2e goes whole to one share (its
`run` instances are heavy on processes) and runs last in it; tests/cluster runs before both shares, alone (ALONE).

Every run writes what its files took to var/test-durations-<share>.json; `python -m tests.support.shards`
merges those into tests/durations.json (after adding or slowing tests).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).parents[2]
DURATIONS = ROOT / "tests" / "durations.json"
MEASURED = ROOT / "var"
WHOLE = ("tests/cluster/", "tests/e2e/")
# Run by neither share but alone before both (Makefile `test`), as they ran at the start of the one-process suite:
# later in a loaded run the failover test's primary once refused writes (NOREPLICAS: its replica past
# min-replicas-max-lag) and an async job's webhook did not come within 120 s, and once recovery took 14 s
# (session 28's note).
ALONE = ("tests/cluster/",)
T = TypeVar("T")


def parse(value: str) -> tuple[int, int]:
    """"i/n" as (i, n), 1 <= i <= n."""
    index, _, count = value.partition("/")
    try:
        share, shares = int(index), int(count)
    except ValueError:
        share, shares = 0, 0
    if not 1 <= share <= shares:
        raise ValueError(f"SCREENSHOT_TEST_SHARD={value!r}: expected i/n with 1 <= i <= n, e.g. 1/2")
    return share, shares


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def unit_of(path: str) -> str:
    """What goes to one share whole: a directory of WHOLE, or the file."""
    return next((prefix for prefix in WHOLE if path.startswith(prefix)), path)


def assign(nodeids: Iterable[str], shares: int, durations: dict[str, float]) -> dict[str, int]:
    """Each unit (unit_of) of `nodeids` to a share, 1..shares, the longest first to the least loaded share; those
    of ALONE to none (0)."""
    tests: dict[str, int] = {}
    for nodeid in nodeids:
        tests[file_of(nodeid)] = tests.get(file_of(nodeid), 0) + 1
    per_test = [durations[path] / count for path, count in tests.items() if durations.get(path)]
    guess = statistics.median(per_test) if per_test else 1.0
    weights: dict[str, float] = {}
    for path, count in tests.items():
        if path.startswith(ALONE):
            continue
        weights[unit_of(path)] = weights.get(unit_of(path), 0.0) + durations.get(path, count * guess)
    load = [0.0] * shares
    placed: dict[str, int] = {}
    for unit in sorted(weights, key=lambda name: (-weights[name], name)):
        share = min(range(shares), key=lambda n: (load[n], n))
        load[share] += weights[unit]
        placed[unit] = share + 1
    return {path: 0 if path.startswith(ALONE) else placed[unit_of(path)] for path in tests}


def in_order(items: list[T], nodeid: Callable[[T], str]) -> list[T]:
    """A share's tests in their order, those of WHOLE last: what starts with the session (the contract run, the
    MCP scenario, the lock's resolution: tests/integration/conftest.py) is over by then, and the failover and
    chaos tests do not meet it on this machine's 2 cores."""
    return sorted(items, key=lambda item: unit_of(file_of(nodeid(item))) in WHOLE)


def known() -> dict[str, float]:
    return json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}


def merge() -> dict[str, float]:
    """tests/durations.json with what the last runs measured (var/test-durations-*.json) in place of it."""
    merged = known()
    for measured in sorted(MEASURED.glob("test-durations-*.json")):
        merged.update(json.loads(measured.read_text()))
    present = {str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")}
    return {path: round(seconds, 1) for path, seconds in sorted(merged.items()) if path in present}


if __name__ == "__main__":
    durations = merge()
    DURATIONS.write_text(json.dumps(durations, indent=1) + "\n")
    sys.stderr.write(f"{DURATIONS.relative_to(ROOT)}: {len(durations)} files, {sum(durations.values()):.0f} s\n")
