"""The order `make test`'s pytest-xdist workers take the test files in (tests/support/scheduling.py), and the work
started with the run that some tests join (tests/support/background.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support import background, scheduling

E2E, CHAOS = "tests/e2e/test_cli.py", "tests/e2e/test_chaos.py"
CONTRACT, MCP = "tests/integration/test_contract.py", "tests/integration/test_mcp.py"


def ids(counts: dict[str, int]) -> list[str]:
    return [f"{path}::test_{n}" for path, count in counts.items() for n in range(count)]


def test_a_file_not_measured_counts_as_its_tests_at_the_median_pace() -> None:
    durations = {"tests/integration/test_known.py": 10.0, "tests/integration/test_other.py": 20.0}
    # 1 s and 2 s a test: 1.5 s, the median, for each test of a file not measured.
    counts = {"tests/integration/test_known.py": 10, "tests/integration/test_other.py": 10,
              "tests/integration/test_new.py": 4, E2E: 2, CHAOS: 1}
    assert scheduling.weights(ids(counts), {**durations, E2E: 3.0}) == {
        "tests/integration/test_known.py": 10.0, "tests/integration/test_other.py": 20.0,
        "tests/integration/test_new.py": 6.0, "tests/e2e/": 4.5}  # the e2e files as one unit


def test_the_longest_first_and_the_late_ones_before_a_tail_as_long_as_they_are() -> None:
    weighed = {"tests/e2e/": 90.0, CONTRACT: 10.0, "tests/integration/test_a.py": 300.0,
               "tests/integration/test_b.py": 60.0, "tests/unit/test_c.py": 50.0, "tests/unit/test_d.py": 40.0,
               "tests/unit/test_e.py": 20.0}
    # The late units take 100 s: test_d and test_e (60 s) do not cover them, test_c with them (110 s) does.
    assert scheduling.units_in_order(weighed) == [
        "tests/integration/test_a.py", "tests/integration/test_b.py", "tests/e2e/", CONTRACT,
        "tests/unit/test_c.py", "tests/unit/test_d.py", "tests/unit/test_e.py"]
    assert scheduling.units_in_order({"tests/e2e/": 9.0, "tests/unit/test_c.py": 1.0}) == [
        "tests/e2e/", "tests/unit/test_c.py"]  # too little to cover: the late ones first


def test_a_file_s_tests_keep_their_order_and_a_unit_stays_together() -> None:
    nodeids = [f"{E2E}::a", "tests/unit/test_z.py::e", f"{CHAOS}::f", "tests/integration/test_a.py::c",
               "tests/integration/test_a.py::d"]
    weighed = {"tests/e2e/": 1.0, "tests/integration/test_a.py": 5.0, "tests/unit/test_z.py": 9.0}
    assert scheduling.in_order(nodeids, str, weighed) == [
        "tests/unit/test_z.py::e", f"{E2E}::a", f"{CHAOS}::f", "tests/integration/test_a.py::c",
        "tests/integration/test_a.py::d"]


def test_the_durations_name_only_test_files_that_exist() -> None:
    known = scheduling.known()
    assert known and all((scheduling.ROOT / path).is_file() for path in known)


def test_a_piece_is_started_once_for_its_test_and_its_outcome_read_when_it_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def quick(directory: Path, stopping: threading.Event) -> None:
        with (directory / "said").open("wb") as said:
            process = subprocess.Popen([sys.executable, "-c", "import sys; print('said'); sys.exit(3)"], stdout=said)
        background.finish(process, directory, stopping)

    def broken(directory: Path, stopping: threading.Event) -> None:
        raise OSError("no such program")

    monkeypatch.setattr(background, "PIECES", (background.Piece("quick", "test_quick", quick),
                                               background.Piece("broken", "test_broken", broken),
                                               background.Piece("unused", "test_unused", quick)))
    pieces = background.Pieces(tmp_path)
    pieces.start(["tests/unit/test_x.py::test_quick", "tests/unit/test_x.py::test_broken[1]"])
    pieces.start(["tests/unit/test_x.py::test_quick"])  # once only
    try:
        done = background.outcome(tmp_path, "test_quick")
        assert done.status(timeout=60) == 3 and done.read("said") == "said\n"
        with pytest.raises(RuntimeError, match="(?s)broken did not start: .*no such program"):
            background.outcome(tmp_path, "test_broken").status(timeout=60)
        with pytest.raises(RuntimeError, match="the run did not start unused"):
            background.outcome(tmp_path, "test_unused").status(timeout=60)
    finally:
        pieces.stop()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["broken", "quick"]


def test_a_piece_still_running_when_the_run_ends_is_ended_without_a_status(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[subprocess.Popen[bytes]] = []

    def slow(directory: Path, stopping: threading.Event) -> None:
        started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]))
        background.finish(started[0], directory, stopping)

    monkeypatch.setattr(background, "PIECES", (background.Piece("slow", "test_slow", slow),))
    pieces = background.Pieces(tmp_path)
    pieces.start(["tests/unit/test_x.py::test_slow"])
    with pytest.raises(TimeoutError, match="slow did not end within 1 s"):
        background.outcome(tmp_path, "test_slow").status(timeout=1)
    pieces.stop()
    assert started[0].returncode is not None and not (tmp_path / "slow" / "status").exists()
