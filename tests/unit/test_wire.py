"""What crosses the queue, typed: a JobResult and a JobRequest survive Redis and JSON as they were."""

from __future__ import annotations

import orjson

from render.contract.wire import JobRequest, JobResult, StoredCopy, StoredSlice, WebhookOrder


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


def test_a_request_with_its_webhook_order_comes_back_as_it_was() -> None:
    job = JobRequest(reference="r1", organisation="o", options={"url": "https://example.com/"}, trace_id="t",
                     deadline=1.0, async_=True, sealed="token",
                     webhook=WebhookOrder("https://hooks.example/x", sign=True, errors=False, schedule=[1, 5],
                                          timeout=10.0))
    assert JobRequest.from_json(orjson.loads(orjson.dumps(job.to_json()))) == job
    assert JobRequest.from_json(JobRequest("r2", "o", {}, "t", 1.0).to_json()).webhook is None


def test_a_small_result_travels_whole_in_its_notification_and_a_large_one_as_its_reference() -> None:
    variant = JobResult("r2", ok=True, format="png", body=b"\n\x89PNG v")  # bodies may hold newlines
    result = JobResult("r1", ok=True, format="png", width=10, height=20, body=b"\x89PNG\n\r\n", settled=True,
                       metadata={"page_title": "a\nb"}, variants=[variant])
    reference, whole = JobResult.from_message(result.to_message(limit=100))
    assert reference == "r1" and whole == result and whole.variants[0].body == b"\n\x89PNG v"
    assert JobResult.from_message(result.to_message(limit=10)) == ("r1", None)  # 15 bytes of bodies
    empty = JobResult("r3", ok=False, error={"error_code": "timeout"})
    assert JobResult.from_message(empty.to_message(limit=0)) == ("r3", empty)
