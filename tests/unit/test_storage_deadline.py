"""A store's calls within their budget: a call that does not return in time is StoreTimedOut naming the store
(transient: an async job tries again), its thread left to end by itself; errors and results pass through."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from storage import Bounded, LocalStorage, StorageError, StoreTimedOut
from storage.deadline import within


class Stalling(LocalStorage):
    """A directory whose writes and reads hang until released."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.release = threading.Event()

    def put(self, key: str, data: bytes, content_type: str):  # type: ignore[no-untyped-def]
        self.release.wait(30)
        return super().put(key, data, content_type)


def test_a_call_past_its_budget_is_store_timed_out_naming_the_store(tmp_path: Path) -> None:
    inner = Stalling(tmp_path)
    store = Bounded(inner, 0.2, inner.where)
    with pytest.raises(StoreTimedOut, match=f"the store \\(directory {tmp_path}\\) did not answer within 0.2 s") as err:
        store.put("a/b.png", b"x", "image/png")
    assert err.value.transient and store.failures["timeout"] == 1
    inner.release.set()
    assert store.put("a/b.png", b"x", "image/png").size == 1 and b"".join(store.open("a/b.png")) == b"x"


def test_a_job_s_deadline_shortens_the_budget_and_a_past_one_leaves_none(tmp_path: Path) -> None:
    store = Bounded(LocalStorage(tmp_path), 60, "directory")
    assert store.until(time.time() + 2).seconds <= 2
    with pytest.raises(StoreTimedOut, match="no time was left"):
        store.until(time.time() - 1).put("k", b"x", "text/plain")


def test_errors_and_values_pass_through_and_errors_are_counted(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    store = Bounded(LocalStorage(tmp_path / "file"), 5, "directory")
    with pytest.raises(StorageError, match="cannot write") as err:
        store.put("k", b"x", "text/plain")
    assert not err.value.transient and store.failures == {"error": 1}
    assert within(5, lambda: 42, "s") == 42


def test_calls_reuse_their_threads_and_a_stalled_call_keeps_none_from_the_next(tmp_path: Path) -> None:
    """Store calls run on threads kept for the next call; one that does not return holds its thread alone, so the
    calls after it still answer at once."""
    seen: set[int] = set()
    for _ in range(20):
        within(5, lambda: seen.add(threading.get_ident()), "s")
    assert len(seen) == 1  # one thread served them all, one after another (a thread a call before)
    inner = Stalling(tmp_path)
    store = Bounded(inner, 0.2, inner.where)
    try:
        for _ in range(3):  # three stalled calls, each holding a thread
            with pytest.raises(StoreTimedOut):
                store.put("k", b"x", "text/plain")
        assert within(5, lambda: 42, "s") == 42
    finally:
        inner.release.set()
