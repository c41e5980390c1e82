"""`make test` runs the suite as two pytest processes at once, each a share of its files (SCREENSHOT_TEST_SHARD,
"1/2" and "2/2"): the suite mostly waits on pages and processes (one process kept about 0.8 of this machine's 2
cores busy), so two overlap well.

Each share takes the files it runs while it runs (SCREENSHOT_TEST_CLAIMS: a directory both see, where taking a
file is making a file of its name there, which only one process can): the longest first, as each share is ready
for its next, so both end together however the machine's pace drifts (a fixed split by the last run's times does
not). Each share is a session of its own (its Redis, site and
service), and a file never straddles two: its module fixtures start once.

Some files are placed before the run instead (anchored):
- tests/e2e goes whole to one share (its `run` instances are heavy on processes), and runs last in it, when what
  started with the sessions is over: the failover and chaos tests do not meet it on this machine's 2 cores;
- a file whose test joins work its share started with the session (JOINING: the contract run, the TypeScript MCP
  scenario, the lock's resolution, tests/conftest.py and tests/integration/conftest.py) runs in that share after
  the files taken at run time, so the work is over by the time it is joined and the share never waits on it.
Anchored units go to the shares the longest first, each to the least loaded; a share with more anchored work than
another leaves the last of the shared files (that much of their time) to the others. The weights come from how
long each file took in a whole run (tests/durations.json: seconds per file, setup and teardown included); a file
not in it counts as its number of tests times the median seconds per test. tests/cluster runs before both shares,
alone (ALONE).

Every run writes what its files took to var/test-durations-<share>.json; `python -m tests.support.shards`
merges those into tests/durations.json (after adding or slowing tests).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).parents[2]
DURATIONS = ROOT / "tests" / "durations.json"
MEASURED = ROOT / "var"
WHOLE = ("tests/cluster/", "tests/e2e/")
# Run by neither share but alone before both (Makefile `test`): in a loaded run the failover test's primary may
# refuse writes (NOREPLICAS: its replica past min-replicas-max-lag) and recover too slowly.
ALONE = ("tests/cluster/",)
JOINING = ("tests/integration/test_contract.py", "tests/integration/test_mcp.py", "tests/unit/test_lock.py")
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


def anchored(path: str) -> bool:
    """Whether `path` is placed before the run (WHOLE, JOINING) rather than taken by a share at run time."""
    return path.startswith(WHOLE) or path in JOINING


def weights(nodeids: Iterable[str], durations: dict[str, float]) -> dict[str, float]:
    """The seconds each unit (unit_of) of `nodeids` is expected to take, those of ALONE left out."""
    tests: dict[str, int] = {}
    for nodeid in nodeids:
        tests[file_of(nodeid)] = tests.get(file_of(nodeid), 0) + 1
    per_test = [durations[path] / count for path, count in tests.items() if durations.get(path)]
    guess = statistics.median(per_test) if per_test else 1.0
    found: dict[str, float] = {}
    for path, count in tests.items():
        if not path.startswith(ALONE):
            found[unit_of(path)] = found.get(unit_of(path), 0.0) + durations.get(path, count * guess)
    return found


def anchor(weighed: dict[str, float], shares: int) -> dict[str, int]:
    """Each anchored unit of `weighed` to a share, 1..shares, the longest first to the least loaded share."""
    load = [0.0] * shares
    placed: dict[str, int] = {}
    for unit in sorted((unit for unit in weighed if anchored(unit)), key=lambda name: (-weighed[name], name)):
        share = min(range(shares), key=lambda n: (load[n], n))
        load[share] += weighed[unit]
        placed[unit] = share + 1
    return placed


def in_order(items: list[T], nodeid: Callable[[T], str], weighed: dict[str, float]) -> list[T]:
    """A share's tests in their order: the files taken at run time, the longest first; then JOINING; WHOLE last.
    A file's own tests keep theirs."""
    def key(item: T) -> tuple[int, float, str]:
        unit = unit_of(file_of(nodeid(item)))
        return (2 if unit in WHOLE else 1 if anchored(unit) else 0, -weighed.get(unit, 0.0), unit)
    return sorted(items, key=key)


class Claims:
    """The units both shares take at run time, each by one: taking one makes a file of its name in `directory`
    (O_EXCL, which one process only can). A share with `lead` seconds more anchored work than the least loaded
    takes none once less than that is left untaken, so that the others' share of it evens the end."""

    def __init__(self, directory: Path, weighed: dict[str, float], lead: float) -> None:
        self.directory, self.weighed, self.lead = directory, weighed, lead
        self.taken: list[str] = []

    def _marker(self, unit: str) -> Path:
        return self.directory / unit.replace("/", "__")

    def take(self, unit: str) -> bool:
        if self.lead > 0:
            left = sum(seconds for name, seconds in self.weighed.items()
                       if not anchored(name) and not self._marker(name).exists())
            if left < self.lead:
                return False
        try:
            os.close(os.open(self._marker(unit), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        self.taken.append(unit)
        return True

    def run(self, items: list[T], nodeid: Callable[[T], str]) -> Iterator[T]:
        """`items` (in_order) but those of units another share took (or this one left), each unit taken as its
        first test is reached: a lazy walk, so a unit is taken only when the share is ready for it."""
        decided: dict[str, bool] = {}
        for item in items:
            unit = unit_of(file_of(nodeid(item)))
            if unit not in decided:
                decided[unit] = anchored(unit) or self.take(unit)
            if decided[unit]:
                yield item


def lead(weighed: dict[str, float], placed: dict[str, int], share: int, shares: int) -> float:
    """How many more seconds of anchored work `share` has than the share with the least."""
    load = [0.0] * shares
    for unit, number in placed.items():
        load[number - 1] += weighed[unit]
    return load[share - 1] - min(load)


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
