"""The order `make test`'s pytest-xdist workers take the test files in (`--dist loadfile --no-loadscope-reorder`:
each worker takes the next file of the collection's order as it is ready for one; tests/conftest.py sorts the
collection with `in_order` and hands xdist `WholeUnits`).

- The longest files first, so that what is left at the end is short and both workers end together.
- tests/e2e is one unit (WHOLE): its `run` instances are heavy on processes, so its files do not run side by side.
- The files that join work started with the run (tests/support/background.py) and tests/e2e come late (LATE), when
  that work is over (the chaos test should not meet it on this machine's 2 cores), yet before a tail of short files
  at least as long as they are, which the other worker runs meanwhile.

The weights are how long each file took in a whole run (tests/durations.json: seconds per file, setup and teardown
included); a file not in it counts as its number of tests times the median seconds per test. `make test` writes
what this run's files took to var/test-durations.json; `python -m tests.support.scheduling` merges it into
tests/durations.json (after adding or slowing tests).
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
MEASURED = ROOT / "var" / "test-durations.json"
WHOLE = ("tests/e2e/",)
JOINING = ("tests/integration/test_contract.py", "tests/integration/test_mcp.py", "tests/unit/test_lock.py")
T = TypeVar("T")


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def unit_of(path: str) -> str:
    """What one worker runs whole: a directory of WHOLE, or the file."""
    return next((prefix for prefix in WHOLE if path.startswith(prefix)), path)


def late(unit: str) -> bool:
    return unit in WHOLE or unit in JOINING


def weights(nodeids: Iterable[str], durations: dict[str, float]) -> dict[str, float]:
    """The seconds each unit (unit_of) of `nodeids` is expected to take."""
    tests: dict[str, int] = {}
    for nodeid in nodeids:
        tests[file_of(nodeid)] = tests.get(file_of(nodeid), 0) + 1
    per_test = [durations[path] / count for path, count in tests.items() if durations.get(path)]
    guess = statistics.median(per_test) if per_test else 1.0
    found: dict[str, float] = {}
    for path, count in tests.items():
        found[unit_of(path)] = found.get(unit_of(path), 0.0) + durations.get(path, count * guess)
    return found


def units_in_order(weighed: dict[str, float]) -> list[str]:
    """The units the longest first, the LATE ones (the longest first) just before the shortest others that
    together take at least as long as they do."""
    early = sorted((unit for unit in weighed if not late(unit)), key=lambda name: (-weighed[name], name))
    held = sorted((unit for unit in weighed if late(unit)), key=lambda name: (-weighed[name], name))
    cover, at = sum(weighed[unit] for unit in held), len(early)
    while at > 0 and cover > 0:
        at -= 1
        cover -= weighed[early[at]]
    return early[:at] + held + early[at:]


def in_order(items: list[T], nodeid: Callable[[T], str], weighed: dict[str, float]) -> list[T]:
    """`items` by units_in_order; a file's own tests keep their order."""
    rank = {unit: n for n, unit in enumerate(units_in_order(weighed))}
    return sorted(items, key=lambda item: rank.get(unit_of(file_of(nodeid(item))), len(rank)))


def known() -> dict[str, float]:
    return json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}


def merge() -> dict[str, float]:
    """tests/durations.json with what the last run measured (var/test-durations.json) in place of it."""
    merged = known()
    if MEASURED.exists():
        merged.update(json.loads(MEASURED.read_text()))
    present = {str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")}
    return {path: round(seconds, 1) for path, seconds in sorted(merged.items()) if path in present}


if __name__ == "__main__":
    durations = merge()
    DURATIONS.write_text(json.dumps(durations, indent=1) + "\n")
    sys.stderr.write(f"{DURATIONS.relative_to(ROOT)}: {len(durations)} files, {sum(durations.values()):.0f} s\n")
