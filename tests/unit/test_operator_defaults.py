"""What an operator meets first: as many workers as the container may use, an address a client can
reach in the banner and links."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.settings import ServiceSettings, default_workers


@pytest.mark.parametrize(("cpu_max", "expected"), [
    ("100000 100000", 1), ("50000 100000", 1), ("150000 100000", 2), ("max 100000", None), (None, None),
], ids=["one-cpu", "half", "one-and-a-half", "unlimited", "no-cgroup"])
def test_workers_follow_the_cgroup_cpu_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_max: str | None,
                                            expected: int | None) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)))  # a big host
    if cpu_max is not None:
        (tmp_path / "cpu.max").write_text(cpu_max + "\n")
    assert default_workers(tmp_path) == (expected if expected is not None else 8)


@pytest.mark.parametrize(("host", "url"), [("0.0.0.0", "http://127.0.0.1:8000"), ("::", "http://[::1]:8000"),
                                           ("10.1.2.3", "http://10.1.2.3:8000"), ("::1", "http://[::1]:8000")])
def test_the_base_url_is_an_address_a_client_can_use(host: str, url: str) -> None:
    assert ServiceSettings(host=host, port=8000).base_url == url
    assert ServiceSettings(host=host, port=8000, public_base_url="https://shots.example/").base_url == \
        "https://shots.example"


@pytest.mark.parametrize(("quota", "expected"), [("100000", 1), ("250000", 3), ("-1", 8)])
def test_workers_follow_a_cgroup_v1_cpu_limit_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quota: str,
                                                 expected: int) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)))
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text(quota + "\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert default_workers(tmp_path) == expected
