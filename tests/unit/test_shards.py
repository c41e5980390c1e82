"""How `make test` shares the test files between its two pytest processes (tests/support/shards.py)."""

from __future__ import annotations

import pytest

from tests.support import shards


def ids(counts: dict[str, int]) -> list[str]:
    return [f"{path}::test_{n}" for path, count in counts.items() for n in range(count)]


def test_the_longest_files_are_spread_and_the_shares_balanced() -> None:
    durations = {"tests/integration/test_a.py": 70.0, "tests/integration/test_b.py": 40.0,
                 "tests/integration/test_c.py": 30.0, "tests/unit/test_d.py": 2.0}
    placed = shards.assign(ids(dict.fromkeys(durations, 3)), 2, durations)
    assert placed == {"tests/integration/test_a.py": 1, "tests/integration/test_b.py": 2,
                      "tests/integration/test_c.py": 2, "tests/unit/test_d.py": 1}


def test_every_file_goes_to_exactly_one_share_the_same_way_each_time() -> None:
    counts = {f"tests/integration/test_{n}.py": n % 7 + 1 for n in range(40)}
    first = shards.assign(ids(counts), 2, {})
    assert first == shards.assign(reversed(ids(counts)), 2, {})
    assert set(first) == set(counts) and set(first.values()) == {1, 2}


def test_a_file_not_measured_counts_as_its_tests_at_the_median_pace() -> None:
    durations = {"tests/integration/test_known.py": 10.0, "tests/integration/test_other.py": 10.0}
    # 10 tests at 1 s each (the median of 10 s / 10 tests) weigh 10 s: the shares stay even at 10 + 10 s.
    counts = {"tests/integration/test_known.py": 10, "tests/integration/test_other.py": 10,
              "tests/integration/test_new.py": 10}
    placed = shards.assign(ids(counts), 3, durations)
    assert sorted(placed.values()) == [1, 2, 3]


def test_the_cluster_and_end_to_end_tests_stay_together() -> None:
    durations = {"tests/cluster/test_failover.py": 30.0, "tests/cluster/test_hosts.py": 30.0,
                 "tests/e2e/test_chaos.py": 30.0, "tests/e2e/test_cli.py": 30.0,
                 "tests/integration/test_x.py": 60.0, "tests/integration/test_y.py": 60.0}
    placed = shards.assign(ids(dict.fromkeys(durations, 2)), 2, durations)
    assert placed["tests/cluster/test_failover.py"] == placed["tests/cluster/test_hosts.py"]
    assert placed["tests/e2e/test_chaos.py"] == placed["tests/e2e/test_cli.py"]


@pytest.mark.parametrize("value", ["", "2", "0/2", "3/2", "a/b", "1/0"])
def test_a_bad_share_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="SCREENSHOT_TEST_SHARD"):
        shards.parse(value)


def test_the_durations_name_only_test_files_that_exist() -> None:
    known = shards.known()
    assert known and all((shards.ROOT / path).is_file() for path in known)


def test_the_cluster_and_end_to_end_tests_run_last_in_their_share_the_rest_in_order() -> None:
    nodeids = ["tests/cluster/test_f.py::a", "tests/e2e/test_c.py::b", "tests/integration/test_a.py::c",
               "tests/integration/test_a.py::d", "tests/unit/test_z.py::e"]
    assert shards.in_order(nodeids, str) == [
        "tests/integration/test_a.py::c", "tests/integration/test_a.py::d", "tests/unit/test_z.py::e",
        "tests/cluster/test_f.py::a", "tests/e2e/test_c.py::b"]


def test_what_runs_alone_is_in_no_share() -> None:
    durations = {"tests/cluster/test_failover.py": 30.0, "tests/integration/test_x.py": 60.0,
                 "tests/integration/test_y.py": 50.0}
    placed = shards.assign(ids(dict.fromkeys(durations, 2)), 2, durations)
    assert placed == {"tests/cluster/test_failover.py": 0, "tests/integration/test_x.py": 1,
                      "tests/integration/test_y.py": 2}
