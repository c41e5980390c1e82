"""Every call to a store with a deadline of its own: a store that takes connections but never answers (a stalled
S3 endpoint, a hung network file system) costs a call at most its budget, and the caller is told that the store
did not answer in time, naming the store, rather than waiting as long as the client library's own timeouts and
retries allow. The call runs on a thread of its own (`_StoreThreads`); past the budget it is left to end by its own
timeouts (the S3 clients' are set from the same budget) and the caller goes on."""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from storage.base import Storage, StoredObject
from storage.errors import StorageError

T = TypeVar("T")
_END = object()


class StoreTimedOut(StorageError):
    """The store did not answer within the call's budget."""

    def __init__(self, message: str) -> None:
        super().__init__(message, transient=True)


class _StoreThreads:
    """The threads store calls run on. A thread whose call is done waits for the next one (KEEP of them at most):
    a cache hit makes several store calls (a stat, each chunk read), and starting a thread costs more than the call
    itself. A call that has not returned holds its thread alone, so a stalled store never makes another call wait."""

    KEEP = 8

    def __init__(self) -> None:
        # The inboxes of the threads waiting for a call.
        self._idle: list[queue.SimpleQueue[tuple[Callable[[], None], threading.Event]]] = []
        self._lock = threading.Lock()

    def run(self, call: Callable[[], None], done: threading.Event) -> None:
        """Start `call` (which must not raise) on a waiting thread, or a new one; `done` is set once it has returned
        and its thread waits for the next call."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name="store-call", daemon=True).start()
        inbox.put((call, done))

    def _serve(self, inbox: queue.SimpleQueue[tuple[Callable[[], None], threading.Event]]) -> None:
        while True:
            call, done = inbox.get()
            call()
            with self._lock:
                kept = len(self._idle) < self.KEEP
                if kept:
                    self._idle.append(inbox)
            done.set()
            if not kept:
                return


_threads = _StoreThreads()


def within(seconds: float, call: Callable[[], T], store: str) -> T:
    """`call()`, or StoreTimedOut when it has not returned within `seconds`."""
    if seconds <= 0:
        raise StoreTimedOut(f"no time was left for the store ({store}) within the job's deadline")
    outcome: list[tuple[bool, Any]] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
            outcome.append((False, error))

    _threads.run(run, done)
    if not done.wait(seconds):
        raise StoreTimedOut(f"the store ({store}) did not answer within {seconds:g} s")
    succeeded, value = outcome[0]
    if succeeded:
        return value
    raise value


class Bounded:
    """A Storage whose every call, and every chunk read, answers within `seconds`; `failures` counts the calls
    that failed, by kind (`timeout`, `error`), for /metrics."""

    def __init__(self, inner: Storage, seconds: float, store: str,
                 failures: Counter[str] | None = None) -> None:
        self.inner = inner
        self.seconds = seconds
        self.store = store  # its name in messages and logs: the bucket and endpoint, or the directory
        self.failures: Counter[str] = Counter() if failures is None else failures

    def until(self, unix_deadline: float) -> Bounded:
        """The same store, its calls also ending by `unix_deadline` (a job's)."""
        return Bounded(self.inner, min(self.seconds, unix_deadline - time.time()), self.store, self.failures)

    def _call(self, call: Callable[[], T]) -> T:
        try:
            return within(self.seconds, call, self.store)
        except StoreTimedOut:
            self.failures["timeout"] += 1
            raise
        except StorageError:
            self.failures["error"] += 1
            raise

    def put(self, key: str, data: bytes, content_type: str) -> StoredObject:
        return self._call(lambda: self.inner.put(key, data, content_type))

    def stat(self, key: str) -> StoredObject | None:
        return self._call(lambda: self.inner.stat(key))

    def open(self, key: str, chunk_size: int = 1 << 16) -> Iterator[bytes]:
        chunks = self.inner.open(key, chunk_size)
        while True:
            chunk = self._call(lambda: next(chunks, _END))
            if chunk is _END:
                return
            yield chunk  # type: ignore[misc]

    def delete(self, key: str) -> None:
        self._call(lambda: self.inner.delete(key))

    def client_url(self, key: str, expires_in: int) -> str | None:
        return self.inner.client_url(key, expires_in)  # signed here, or a CDN's address: no call to the store
