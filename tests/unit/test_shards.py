"""How `make test` shares the test files between its two pytest processes (tests/support/shards.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import shards

E2E, CHAOS = "tests/e2e/test_cli.py", "tests/e2e/test_chaos.py"
CONTRACT, MCP = "tests/integration/test_contract.py", "tests/integration/test_mcp.py"


def ids(counts: dict[str, int]) -> list[str]:
    return [f"{path}::test_{n}" for path, count in counts.items() for n in range(count)]


def test_a_file_not_measured_counts_as_its_tests_at_the_median_pace() -> None:
    durations = {"tests/integration/test_known.py": 10.0, "tests/integration/test_other.py": 20.0}
    # 1 s and 2 s a test: 1.5 s, the median, for each test of a file not measured.
    counts = {"tests/integration/test_known.py": 10, "tests/integration/test_other.py": 10,
              "tests/integration/test_new.py": 4, "tests/cluster/test_failover.py": 3}
    assert shards.weights(ids(counts), durations) == {"tests/integration/test_known.py": 10.0,
                                                       "tests/integration/test_other.py": 20.0,
                                                       "tests/integration/test_new.py": 6.0}  # ALONE: none


def test_the_anchored_units_are_spread_the_longest_first_and_the_rest_left_to_run_time() -> None:
    weighed = shards.weights(ids({E2E: 2, CHAOS: 1, CONTRACT: 1, MCP: 3, "tests/integration/test_x.py": 5}),
                             {E2E: 100.0, CHAOS: 50.0, CONTRACT: 40.0, MCP: 60.0, "tests/integration/test_x.py": 300})
    placed = shards.anchor(weighed, 2)
    assert placed == {"tests/e2e/": 1, MCP: 2, CONTRACT: 2}  # the e2e tests whole, test_x at run time
    assert shards.lead(weighed, placed, 1, 2) == 50.0 and shards.lead(weighed, placed, 2, 2) == 0.0


@pytest.mark.parametrize("value", ["", "2", "0/2", "3/2", "a/b", "1/0"])
def test_a_bad_share_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="SCREENSHOT_TEST_SHARD"):
        shards.parse(value)


def test_the_durations_name_only_test_files_that_exist() -> None:
    known = shards.known()
    assert known and all((shards.ROOT / path).is_file() for path in known)


def test_the_longest_run_first_then_what_joins_background_work_the_end_to_end_tests_last() -> None:
    nodeids = [f"{E2E}::a", f"{CONTRACT}::b", "tests/integration/test_a.py::c", "tests/integration/test_a.py::d",
               "tests/unit/test_z.py::e"]
    weighed = {"tests/e2e/": 90.0, CONTRACT: 200.0, "tests/integration/test_a.py": 5.0, "tests/unit/test_z.py": 9.0}
    assert shards.in_order(nodeids, str, weighed) == [
        "tests/unit/test_z.py::e", "tests/integration/test_a.py::c", "tests/integration/test_a.py::d",
        f"{CONTRACT}::b", f"{E2E}::a"]


def test_each_unit_is_taken_by_one_share_only(tmp_path: Path) -> None:
    weighed = {"tests/integration/test_a.py": 5.0, "tests/integration/test_b.py": 4.0, "tests/e2e/": 9.0}
    items = ["tests/integration/test_a.py::x", "tests/integration/test_a.py::y", "tests/integration/test_b.py::z",
             "tests/e2e/test_cli.py::w"]
    one, two = shards.Claims(tmp_path, weighed, 0.0), shards.Claims(tmp_path, weighed, 0.0)
    first, second = one.run(items, str), two.run(items, str)
    assert next(first) == "tests/integration/test_a.py::x"  # test_a is the first's now
    assert next(second) == "tests/integration/test_b.py::z"  # so the second goes on to test_b
    assert next(second) == "tests/e2e/test_cli.py::w"  # anchored: every share that has it runs it
    assert list(first) == ["tests/integration/test_a.py::y", "tests/e2e/test_cli.py::w"]
    assert one.taken == ["tests/integration/test_a.py"] and two.taken == ["tests/integration/test_b.py"]


def test_a_share_with_more_anchored_work_leaves_the_end_of_the_shared_files_to_the_other(tmp_path: Path) -> None:
    weighed = {"tests/integration/test_a.py": 50.0, "tests/integration/test_b.py": 30.0,
               "tests/integration/test_c.py": 10.0}
    ahead = shards.Claims(tmp_path, weighed, 35.0)  # 35 s more of anchored work than the other share
    assert ahead.take("tests/integration/test_a.py")  # 90 s left untaken
    assert ahead.take("tests/integration/test_b.py")  # 40 s
    assert not ahead.take("tests/integration/test_c.py")  # 10 s left: the other's
    assert shards.Claims(tmp_path, weighed, 0.0).take("tests/integration/test_c.py")


def test_a_share_without_the_claims_directory_is_refused_with_what_to_do() -> None:
    environment = {**os.environ, "SCREENSHOT_TEST_SHARD": "1/2"}
    environment.pop("SCREENSHOT_TEST_CLAIMS", None)
    answer = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/unit/test_shards.py"],
                            cwd=shards.ROOT, env=environment, capture_output=True, text=True, timeout=120)
    assert answer.returncode != 0 and "needs SCREENSHOT_TEST_CLAIMS" in answer.stdout + answer.stderr
