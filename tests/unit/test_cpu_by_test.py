"""bench/cpu_by_test.py counts the CPU of pytest's whole process tree, the children that ended included."""

from __future__ import annotations

import os
import subprocess
import sys

from bench.cpu_by_test import tree_cpu


def test_a_child_that_ended_counts_to_its_parent_s_tree() -> None:
    before = tree_cpu(os.getpid())
    spent = subprocess.run([sys.executable, "-c", "import os, time\nend = time.process_time() + 0.3\n"
                            "while time.process_time() < end: pass\nprint(sum(os.times()[:2]))"],
                           capture_output=True, text=True, check=True)
    assert tree_cpu(os.getpid()) - before >= float(spent.stdout) * 0.9  # the child's own time, reaped
