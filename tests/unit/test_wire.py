"""What crosses the queue, typed: a JobResult and a JobRequest survive Redis and JSON as they were."""

from __future__ import annotations

import orjson
import pytest

from render.contract.comparing import CompareJob
from render.contract.monitors import MonitorOrder
from render.contract.wire import (
    Capture,
    Compare,
    JobRequest,
    JobResult,
    Recorded,
    StoredCopy,
    StoredSlice,
    Variant,
    Variants,
    Waiting,
    WebhookOrder,
)


def test_a_result_with_every_typed_field_comes_back_as_it_was() -> None:
    variant = JobResult("r2", ok=False, error={"error_code": "selector_not_found"})
    result = JobResult(
        "r1", ok=True, content_type="image/png", size_bytes=3, format="png", width=10, height=20, body=b"png",
        acquire_seconds=0.01, blocked_requests=2, metadata={"page_title": "T"}, vision_completion="a cat",
        content_key="k/content.html", stored_copy=StoredCopy("bucket", "shots/a.png", None),
        slices=[StoredSlice(0, 0, 10, 10, "k/s0.png"), StoredSlice(1, 10, 10, 10, "k/s1.png")],
        slices_manifest="k/slices.json", variants=[variant])
    variant.body = b"v"
    fields = {key if isinstance(key, bytes) else key.encode(): value if isinstance(value, bytes) else bytes(value)
              for key, value in result.to_redis().items()}  # as Redis hands them back
    assert JobResult.from_redis(fields) == result
    cached = JobResult.from_meta(orjson.loads(orjson.dumps(result.meta())), b"png")  # the cache's way: no bodies
    assert cached.meta() == result.meta() and cached.body == b"png" and cached.variants[0].body == b""
    assert isinstance(JobResult.from_meta(result.meta()).slices[1], StoredSlice)


def test_a_result_kept_by_an_older_version_is_still_read() -> None:
    old = {"reference": "r1", "ok": True, "format": "png", "extra": {"acquire_seconds": 0.1}, "variants": []}
    assert JobResult.from_meta(old) == JobResult("r1", ok=True, format="png")


WEBHOOK = WebhookOrder("https://hooks.example/x", sign=True, errors=False, schedule=[1, 5], timeout=10.0)
EVERY_SHAPE = [
    JobRequest("r1", "o", "t", Capture({"url": "https://example.com/"}, sealed="token", store=True),
               Recorded(timeout=30.0, monitor=MonitorOrder("m1", due=100, threshold=5)), webhook=WEBHOOK),
    JobRequest("r2", "o", "t", Capture({"url": "https://example.com/"}, model="animate", store_key="cache/k",
                                       keep_body=True), Waiting("results:api", deadline=1.0)),
    JobRequest("r3", "o", "t", Variants(Capture({"format": "png"}), [Variant("r4", {"format": "jpg"}, True)]),
               Waiting("results:api", deadline=2.0), enqueued_at=5.0),
    JobRequest("r5", "o", "t", Compare(CompareJob("a.png", "b.png", threshold=3), keep_body=True),
               Waiting("results:api", deadline=3.0)),
]


@pytest.mark.parametrize("job", EVERY_SHAPE, ids=lambda job: f"{job.work.what}-{job.answer.by}")
def test_a_request_of_every_shape_comes_back_as_it_was(job: JobRequest) -> None:
    assert JobRequest.from_json(orjson.loads(orjson.dumps(job.to_json()))) == job


def test_what_a_job_runs_and_how_it_is_answered_read_from_its_types() -> None:
    recorded, animate, variants, compare = EVERY_SHAPE
    assert [job.kind for job in EVERY_SHAPE] == ["take", "animate", "take", "compare"]
    assert recorded.monitor == MonitorOrder("m1", due=100, threshold=5) and animate.monitor is None
    assert variants.options == {"format": "png"} and compare.options == CompareJob("a.png", "b.png", 3).to_json()
    assert recorded.deadline == 0.0 and recorded.started(100.0).deadline == 130.0
    assert animate.started(100.0) is animate  # a waiting job's deadline was fixed by its API


def test_a_request_an_earlier_version_offered_is_read_as_today_s() -> None:
    """A job whose fields were all at one level (still in a lane, or kept for the sweep) after an upgrade."""
    flat = {"reference": "r1", "organisation": "o", "options": {"url": "https://example.com/"}, "trace_id": "t",
            "deadline": 0.0, "reply_channel": None, "store_result": True, "enqueued_at": 4.0, "store_key": None,
            "keep_body": False, "async_": True, "timeout": 30.0, "variants": None, "kind": "take", "sealed": "s",
            "webhook": {"url": "https://hooks.example/x", "sign": True, "errors": False, "schedule": [1, 5],
                        "timeout": 10.0}, "monitor": {"monitor": "m1", "due": 100, "threshold": 5}}
    assert JobRequest.from_json(flat) == JobRequest(
        "r1", "o", "t", Capture({"url": "https://example.com/"}, sealed="s", store=True),
        Recorded(timeout=30.0, monitor=MonitorOrder("m1", due=100, threshold=5)), webhook=WEBHOOK, enqueued_at=4.0)
    waiting = {**flat, "async_": False, "reply_channel": "results:api", "deadline": 9.0, "monitor": None,
               "webhook": None, "variants": [{"reference": "r2", "options": {}, "store": False}]}
    assert JobRequest.from_json(waiting).answer == Waiting("results:api", 9.0)
    assert JobRequest.from_json(waiting).work == Variants(Capture({"url": "https://example.com/"}, sealed="s",
                                                                  store=True), [Variant("r2", {}, False)])
    compare = {**waiting, "kind": "compare", "options": {"before": "a", "after": "b", "threshold": 2},
               "variants": None}
    assert JobRequest.from_json(compare).work == Compare(CompareJob("a", "b", 2))


def test_a_small_result_travels_whole_in_its_notification_and_a_large_one_as_its_reference() -> None:
    variant = JobResult("r2", ok=True, format="png", body=b"\n\x89PNG v")  # bodies may hold newlines
    result = JobResult("r1", ok=True, format="png", width=10, height=20, body=b"\x89PNG\n\r\n", settled=True,
                       metadata={"page_title": "a\nb"}, variants=[variant])
    reference, whole = JobResult.from_message(result.to_message(limit=100))
    assert reference == "r1" and whole == result and whole.variants[0].body == b"\n\x89PNG v"
    assert JobResult.from_message(result.to_message(limit=10)) == ("r1", None)  # 15 bytes of bodies
    empty = JobResult("r3", ok=False, error={"error_code": "timeout"})
    assert JobResult.from_message(empty.to_message(limit=0)) == ("r3", empty)
