"""The benchmark's chart: per scenario, the p50 of the floor, the plain script and the service, as bars.

`make bench` writes it to `bench/latest.svg` (matplotlib, text kept as text so the SVG stays small and
searchable; no date in it, so two runs with the same figures write the same file).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

SIDES = (("floor", "floor: one warm page, goto + CDP capture", "#9aa5b1"),
         ("plain", "plain Playwright script", "#f08c00"),
         ("service", "screenshot-service", "#3b5bdb"))


def write_chart(p50_ms: Mapping[str, Mapping[str, float]], path: Path, title: str) -> None:
    """`p50_ms`: for each scenario (in the order to show, top first), the p50 in ms of the sides that ran it
    (`floor`, `plain`, `service`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "bench", "font.size": 9})
    scenarios: Sequence[str] = list(p50_ms)
    height = 0.8 / len(SIDES)
    # Bars start at the power of ten below the quickest figure (a log scale has no 0).
    start = 10.0 ** math.floor(math.log10(min(value for sides in p50_ms.values() for value in sides.values())))
    figure, axes = plt.subplots(figsize=(9, 0.55 * len(scenarios) + 1.4))
    for index, (side, label, colour) in enumerate(SIDES):
        rows = [(row, p50_ms[name][side]) for row, name in enumerate(scenarios) if side in p50_ms[name]]
        if not rows:
            continue
        ys = [row + (index - (len(SIDES) - 1) / 2) * height for row, _ in rows]
        values = [value for _, value in rows]
        # From `start` to the figure; each bar named by its side and its scenario's row.
        bars = axes.barh(ys, [value - start for value in values], left=start, height=height, color=colour,
                         label=label)
        for bar, (row, _) in zip(bars, rows, strict=True):
            bar.set_gid(f"bar-{side}-{row}")
        axes.bar_label(bars, labels=[f"{value:,.0f}" for value in values], padding=2, fontsize=7)
    axes.set_yticks(range(len(scenarios)), labels=scenarios)
    axes.invert_yaxis()  # the first scenario on top
    axes.set_xscale("log")
    axes.set_xlabel("p50 latency, ms (log scale; shorter is faster)")
    axes.set_title(title)
    axes.set_xlim(left=start)
    axes.legend(loc="upper right", fontsize=8)  # the first scenarios, at the top, are the quick ones
    axes.grid(axis="x", which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, format="svg", metadata={"Date": None})
    plt.close(figure)
