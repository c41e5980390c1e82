"""A soak: mixed captures through the API on two workers; each worker's memory (its own process
and its Chromium, as proportional set size so shared pages count once) stays at its steady level. Chromium
is not restarted during the soak (SCREENSHOT_JOBS_PER_BROWSER above the job count), so a leak would show.

`make test` runs 200 captures (about 35 s here); `make soak` runs the full 1,000 (SOAK_CAPTURES).
The measurements go to stderr (`pytest -s` shows them) and to `soak.json` in the test's directory; the
docs/capacity.md's sizing advice quotes them.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support.servers import RunningService, memory_kib, process_tree, redis_server, running_service
from tests.support.site import Site

pytestmark = pytest.mark.browser
CAPTURES = int(os.environ.get("SOAK_CAPTURES", "200"))
WARM_UP = max(10, CAPTURES // 10)
WORKERS = 2
CLIENTS = 4  # so each worker always has its next job waiting
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def soaked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    data_dir = tmp_path_factory.mktemp("soak")
    (data_dir / "redis").mkdir()
    with redis_server(data_dir / "redis") as url, running_service(
            url, data_dir, workers=WORKERS, SCREENSHOT_JOBS_PER_BROWSER=str(CAPTURES * 2)) as running:
        yield running


def measure(workers: list[int]) -> dict[str, dict[str, float]]:
    """Per worker: its Python process's RSS, and the PSS of it with everything it started (Chromium)."""
    report = {}
    for number, worker in enumerate(workers):
        tree = process_tree(worker)
        report[f"worker{number}"] = {"python_rss_mib": round(memory_kib(worker, "Rss") / 1024, 1),
                                     "total_pss_mib": round(sum(memory_kib(pid, "Pss") for pid in tree) / 1024, 1),
                                     "processes": len(tree)}
    return report


def mixed_kinds(site: Site) -> list[dict[str, str]]:
    kinds = [
        {"url": site.url("/colours.html"), "viewport_width": "400", "viewport_height": "300"},
        {"url": site.url("/article.html"), "format": "jpeg", "full_page": "true"},
        {"url": site.url("/gradient.html"), "format": "webp", "image_width": "200"},
        {"html": "<h1 style='color:red'>soak</h1>", "format": "png"},
        {"markdown": "# Soak\n\n* one\n* two", "format": "pdf"},
        {"url": site.url("/colours.html"), "format": "jpeg", "image_quality": "50", "device_scale_factor": "2"},
        {"url": site.url("/colours.html"), "response_type": "json", "metadata_page_title": "true"},
        {"url": site.url("/article.html"), "block_ads": "true", "block_cookie_banners": "true"},
    ]
    return kinds


@pytest.mark.timeout(900)
def test_mixed_captures_leave_the_workers_at_their_steady_memory(  # type: ignore[no-untyped-def]
        soaked: RunningService, site: Site, tmp_path: Path, make_org_in) -> None:
    key = make_org_in(soaked.redis_url, quota=CAPTURES * 2, concurrency=CLIENTS).access_key
    workers = [soaked.processes[f"worker{number}"].pid for number in range(WORKERS)]
    kinds = mixed_kinds(site)
    # The warm-up sends each kind to every worker (the same kind twice at once, while both are busy), so
    # what a kind loads once (the ad lists, say) is in each worker's steady level.
    warm_up = [kind for kind in kinds for _ in range(WORKERS)] * max(2, WARM_UP // (len(kinds) * WORKERS))
    measured = list(itertools.islice(itertools.cycle(kinds), CAPTURES - len(warm_up)))

    def send(params: dict[str, str]) -> int:
        with httpx.Client(base_url=soaked.url, timeout=120) as http:
            return http.get("/v1/screenshot/take", params={"access_key": key, **params}).status_code

    with ThreadPoolExecutor(WORKERS) as pool:
        warm = list(pool.map(send, warm_up))
    steady = measure(workers)
    with ThreadPoolExecutor(CLIENTS) as pool:
        rest = list(pool.map(send, measured))
    after = measure(workers)
    statuses = warm + rest
    assert statuses.count(200) == CAPTURES, {code: statuses.count(code) for code in set(statuses)}
    with httpx.Client(base_url=soaked.url) as http:
        assert http.get("/v1/screenshot/usage", params={"access_key": key}).json()["used"] == CAPTURES
    api_rss = round(memory_kib(soaked.processes["api"].pid, "Rss") / 1024, 1)
    report = {"captures": CAPTURES, "after_warm_up": steady, "after_all": after, "api_rss_mib": api_rss}
    (tmp_path / "soak.json").write_text(json.dumps(report, indent=2))
    sys.stderr.write(f"\nsoak: {json.dumps(report)}\n")
    # Memory may move within a band (caches, allocator), but not grow with the number of jobs: after nine
    # times the warm-up's jobs more, each worker stays within 20% (+30 MiB) of its level after the warm-up.
    for name, before in steady.items():
        assert after[name]["python_rss_mib"] <= before["python_rss_mib"] * 1.2 + 30, report
        assert after[name]["total_pss_mib"] <= before["total_pss_mib"] * 1.2 + 30, report
