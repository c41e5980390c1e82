"""Where the service's time goes: py-spy profiles of the API and a worker while the simple page is captured.

    .venv/bin/python -m bench.profile [--shots 300] [--workers 1] [--params k=v ...]

Starts the benchmark's site and the service as `bench.run` does (a real redis-server, the API, the workers,
network policy on), takes `--shots` captures of the simple page one after another, and records the API
process and every worker with py-spy (`--idle`, so time spent waiting shows too) for the whole run. Writes
`bench/results/profile-<role>.txt` (py-spy's "raw" collapsed stacks, one line per stack with its sample
count) and prints, for each process, the share of samples in its hottest frames, own and cumulative. Needs
py-spy (`pip install py-spy`, a dev dependency) and root or ptrace rights over the service's processes.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from bench.pages import SITE_ADDRESS, serve_bench_pages
from bench.sides import SIMPLE, Service
from render.settings import RenderSettings
from tests.support.servers import cpu_seconds as process_cpu
from tests.support.servers import process_tree
from tests.support.site import Site

RESULTS = Path(__file__).resolve().parent / "results"


def hottest(collapsed: Path, top: int = 25) -> str:
    """The frames with most samples, cumulative (anywhere in a stack) and own (at its top)."""
    total, cumulative, own = 0, collections.Counter[str](), collections.Counter[str]()
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        samples = int(count)
        frames = [frame.split(" (")[0] + " " + frame.rsplit("/", 1)[-1].rstrip(")") for frame in stack.split(";")]
        total += samples
        for frame in set(frames):
            cumulative[frame] += samples
        own[frames[-1]] += samples
    if not total:
        return "  (no samples)"
    lines = [f"  {total} samples; cumulative:"]
    lines += [f"    {count / total:6.1%}  {frame}" for frame, count in cumulative.most_common(top)]
    lines += ["  own:"] + [f"    {count / total:6.1%}  {frame}" for frame, count in own.most_common(top)]
    return "\n".join(lines)


def cpu_seconds(roles: dict[str, int]) -> dict[str, float]:
    """CPU time (user + system, with reaped children's) so far of each role's process tree, by program: a
    worker's Python, its Playwright driver (node) and its Chromium apart; every redis-server; this process
    (the client and the benchmark's site)."""
    used: collections.Counter[str] = collections.Counter()
    for role, root in roles.items():
        for pid in process_tree(root):
            try:
                name = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            kind = "python" if pid == root else "node" if name.startswith("node") else "chromium"
            used[f"{role} {kind}"] += process_cpu([pid])
    for stat in Path("/proc").glob("[0-9]*/comm"):
        try:
            if stat.read_text().strip() == "redis-server":
                used["redis-server"] += process_cpu([int(stat.parent.name)])
        except OSError:
            continue
    used["client and site"] = sum(os.times()[:2])
    return dict(used)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shots", type=int, default=300)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--rate", type=int, default=250,
                        help="py-spy samples per second (0: no profile, only the CPU times)")
    parser.add_argument("--params", nargs="*", default=[], help="extra capture parameters, key=value")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(__file__).resolve().parent.parent / ".venv" / "bin" / "py-spy")
    extra = dict(pair.split("=", 1) for pair in args.params)
    serve_bench_pages()
    RESULTS.mkdir(exist_ok=True)
    with Site(host=SITE_ADDRESS) as site, Service(site.base, args.workers, RenderSettings().chromium_path) as service:
        for _ in range(20):  # warm: the browser, the contexts, the connections
            service.shot(SIMPLE, **extra)
        spies = {}
        for role, pid in service.pids.items():
            if role == "webhooks" or not args.rate:
                continue
            out = RESULTS / f"profile-{role}.txt"
            spies[role] = (out, subprocess.Popen(
                [spy, "record", "--idle", "--format", "raw", "--rate", str(args.rate), "--nonblocking",
                 "--pid", str(pid), "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)  # py-spy attached
        roles = {role: pid for role, pid in service.pids.items() if role != "webhooks"}
        before = cpu_seconds(roles)
        shots = [service.shot(SIMPLE, **extra) for _ in range(args.shots)]
        after = cpu_seconds(roles)
        for _, spy_process in spies.values():
            spy_process.send_signal(2)
        for _, spy_process in spies.values():
            spy_process.wait(30)
    total = statistics.median(shot.seconds for shot in shots) * 1000
    rendering = statistics.median((shot.rendering or 0) for shot in shots) * 1000
    outside = statistics.median(shot.seconds - (shot.rendering or 0) for shot in shots) * 1000
    print(f"{args.shots} shots: p50 {total:.1f} ms end to end, {rendering:.1f} ms rendering, {outside:.1f} ms outside")
    print("CPU per capture (user + system):")
    for name in sorted(after, key=lambda name: before.get(name, 0) - after[name]):
        print(f"  {(after[name] - before.get(name, 0)) / args.shots * 1000:6.1f} ms  {name}")
    print(f"  {(sum(after.values()) - sum(before.values())) / args.shots * 1000:6.1f} ms  in all, against "
          f"{total:.1f} ms end to end on {os.cpu_count()} cores")
    for role, (out, _) in spies.items():
        print(f"\n{role} ({out}):\n{hottest(out)}" if out.exists() else f"\n{role}: py-spy wrote nothing")


if __name__ == "__main__":
    main()
