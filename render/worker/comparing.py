"""Two stored shots compared on a worker (`POST /compare`'s compare job, a monitor's run): the change, and the
diff image stored beside them. No browser: it runs on the worker's own thread."""

from __future__ import annotations

import logging
import time

import redis

from render.contract.comparing import Change
from render.contract.errors import ErrorDetail, RequestNotValid, StorageAccessDenied
from render.contract.formats import FORMATS
from render.contract.wire import Compare, JobRequest, JobResult
from render.output.compare import compare
from render.queue import monitors
from storage import Storage, StorageError, object_key

log = logging.getLogger(__name__)


def read_stored(storage: Storage, key: str, label: str) -> bytes:
    """A stored shot's bytes, or an error naming it (`label`: before, after)."""
    try:
        return b"".join(storage.open(key))
    except StorageError:
        raise RequestNotValid(f"The {label} shot is no longer stored (results are kept as long as their links "
                              "last: SCREENSHOT_RESULT_URL_TTL); capture it again.",
                              [ErrorDetail(label, "no longer stored")]) from None


def changes(before: bytes, after: bytes, threshold: int) -> tuple[Change, bytes]:
    """What changed from `before` to `after`, and the diff image (PNG)."""
    found = compare(before, after, threshold)
    change = Change(changed_share=found.changed_share, ssim=found.ssim,
                    boxes=[{"x": x, "y": y, "width": w, "height": h} for x, y, w, h in found.boxes],
                    inserted_rows=found.inserted_rows, removed_rows=found.removed_rows,
                    width=found.width, height=found.height)
    return change, found.diff


def store_diff(storage: Storage, organisation: str, reference: str, diff: bytes) -> str:
    key = object_key(organisation, f"{reference}-diff", "png")
    try:
        storage.put(key, diff, FORMATS["png"].media_type)
    except StorageError as error:
        raise StorageAccessDenied(f"Could not store the diff image: {error}") from None
    return key


def run_compare_job(job: JobRequest, work: Compare, storage: Storage) -> JobResult:
    """A compare job's result: the diff image stored, the change in its metadata."""
    started = time.monotonic()
    order = work.order
    before = read_stored(storage, order.before, "before")
    after = read_stored(storage, order.after, "after")
    change, diff = changes(before, after, order.threshold)
    key = store_diff(storage, job.organisation, job.reference, diff)
    png = FORMATS["png"]
    return JobResult(job.reference, ok=True, rendering_seconds=time.monotonic() - started, content_type=png.media_type,
                     size_bytes=len(diff), format=png.name, width=change.width, height=change.height, storage_key=key,
                     body=diff if work.keep_body else b"", metadata={"comparison": change.to_json()})


def compare_run(storage: Storage, connection: redis.Redis | None, job: JobRequest, result: JobResult) -> None:
    """A monitor's successful run compared with the monitor's last success as it is now: the change in the result's
    metadata (`comparison`, and `previous_reference`), the diff image stored beside it (`diff`). The first run,
    or one whose last success is no longer stored, is a new baseline: nothing to compare."""
    order = job.monitor
    if order is None or connection is None or not result.ok or result.storage_key is None:
        return
    monitor = monitors.load(connection, order.monitor)
    last = monitor.last_success if monitor is not None else None
    if not last:
        return
    try:
        before = b"".join(storage.open(last["key"]))
    except StorageError:
        log.info("monitor %s: its last success %s is no longer stored; run %s is a new baseline", order.monitor,
                 last["reference"], job.reference)
        return
    after = result.body or read_stored(storage, result.storage_key, "after")
    change, diff = changes(before, after, order.threshold)
    result.artefacts["diff"] = store_diff(storage, job.organisation, job.reference, diff)
    result.metadata["comparison"] = change.to_json()
    result.metadata["previous_reference"] = last["reference"]
