"""Where a long command's CPU goes, by program: `.venv/bin/python -m bench.suite_cpu -- make test` runs the command,
reads every process's CPU time from /proc once a second, and at its end prints the CPU seconds of each kind of
process (Chromium, the service's API, workers and deliverer, pytest, Node, schemathesis, Redis, ffmpeg, the rest)
beside the wall time and what the machine's cores had. For `make test`, which keeps this machine's 2 cores busy:
what the suite spends is what may be cut.

A process is counted up to its last reading (up to a second of a short-lived one is missed), by its own user and
system time, as the kind it was first seen as; its children are counted as themselves. The kernel's own threads
(network soft interrupts, RCU) are a row of their own. The catch-all kinds (python, other) are followed by their
largest command lines, as those name what is left to label."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
# (label, what its command line contains), the first that matches.
KINDS = (("chromium", "chromium"),
         ("service api", "service.cli api"), ("service worker", "service.cli worker"),
         ("service deliverer", "service.cli webhooks"), ("service mcp", "service.cli mcp"),
         ("service run", "screenshot-service run"), ("schemathesis", "schemathesis"),
         ("playwright driver (node)", "playwright/driver"), ("node", "node"), ("pytest", "pytest"),
         ("redis", "redis-server"), ("ffmpeg", "ffmpeg"), ("podman", "podman"), ("python", "python"))
CATCH_ALL = ("python", "other")


def _reading() -> dict[int, tuple[str, float, str]]:
    """Every process's kind, CPU seconds so far and command line."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            kernel = stat.parent.name == "2" or fields[1] == "2"  # kthreadd and its threads
            kind = "kernel threads" if kernel else next((label for label, mark in KINDS if mark in command), "other")
            found[int(stat.parent.name)] = (kind, (int(fields[11]) + int(fields[12])) / TICKS, command.strip())
    return found


def main() -> int:
    command = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    if not command:
        sys.stderr.write(__doc__ + "\n")
        return 2
    before = _reading()
    last: dict[int, tuple[str, float, str]] = {}
    started = time.monotonic()
    process = subprocess.Popen(command)
    while process.poll() is None:
        for pid, (kind, seconds, line) in _reading().items():
            if pid in last and last[pid][0] != "other":
                kind, line = last[pid][0], last[pid][2]  # as first seen: an ending process's command line reads empty
            last[pid] = (kind, seconds - before.get(pid, (kind, 0.0, line))[1], line)
        time.sleep(1)
    wall = time.monotonic() - started
    spent: Counter[str] = Counter()
    unlabelled: Counter[str] = Counter()
    for kind, seconds, line in last.values():
        spent[kind] += seconds
        if kind in CATCH_ALL:
            unlabelled[f"{kind}: {line[:100]}"] += seconds
    cores = len(os.sched_getaffinity(0))
    print(f"\n{' '.join(command)}: exit {process.returncode}, {wall:.0f} s wall, {sum(spent.values()):.0f} CPU s "
          f"of {wall * cores:.0f} the {cores} cores had")
    for kind, seconds in spent.most_common():
        print(f"  {kind:28} {seconds:8.0f} s  {seconds / max(sum(spent.values()), 1e-9):6.1%}")
    print("the largest of the unlabelled:")
    for line, seconds in unlabelled.most_common(12):
        print(f"  {seconds:8.0f} s  {line}")
    return process.returncode


if __name__ == "__main__":
    sys.exit(main())
