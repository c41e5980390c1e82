"""bench/latest.svg: one bar a side a scenario, lengths in the figures' proportions, text kept as text."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.chart import write_chart

SVG = "{http://www.w3.org/2000/svg}"


def bar_widths(root: ET.Element, side: str) -> list[float]:
    """The widths of one side's bars, top to bottom, from their rectangles' paths (M x y L x2 y ...)."""
    widths = []
    for group in root.iter(f"{SVG}g"):
        if (group.get("id") or "").startswith(f"bar-{side}-"):
            [path] = group.iter(f"{SVG}path")
            xs = [float(x) for x in re.findall(r"[ML]\s*([-\d.]+)\s+[-\d.]+", path.get("d", ""))]
            widths.append(max(xs) - min(xs))
    return widths


def test_the_chart_shows_each_side_of_each_scenario_in_proportion(tmp_path: Path) -> None:
    path = tmp_path / "chart.svg"
    figures = {"simple page, png": {"floor": 60.0, "plain": 120.0, "service": 80.0},
               "full page 10,000 px": {"floor": 300.0, "plain": 660.0, "service": 400.0},
               "5 s scroll mp4 (service)": {"service": 5500.0}}
    write_chart(figures, path, "a title")
    svg = path.read_text()
    root = ET.fromstring(svg)
    texts = " ".join("".join(node.itertext()) for node in root.iter(f"{SVG}text"))
    for words in ("simple page, png", "full page 10,000 px", "5 s scroll mp4 (service)", "a title",
                  "plain Playwright script", "screenshot-service", "goto + CDP capture"):
        assert words in texts, words
    assert len(bar_widths(root, "floor")) == len(bar_widths(root, "plain")) == 2
    assert len(bar_widths(root, "service")) == 3
    # A log scale: the bars' lengths grow with the figures, in their order.
    floor, plain, service = (bar_widths(root, side) for side in ("floor", "plain", "service"))
    assert floor[0] < service[0] < plain[0] and floor[1] < service[1] < plain[1] < service[2]
    # Nothing of the moment it was drawn: the same figures write the same file.
    write_chart(figures, tmp_path / "again.svg", "a title")
    assert (tmp_path / "again.svg").read_text() == svg
