"""The hand-off of jobs to workers (render.queue.lanes) on a real redis-server: a job is handed to one worker,
offered again only when that worker is proven gone before starting it, and never started twice; a webhook
delivery is queued once however many times its job is finished. Its fairness (the order of organisations and
classes, admission by share) is in test_fair_lanes.py."""

from __future__ import annotations

import orjson
import redis

from render.contract.wire import JobResult, WebhookOrder
from render.queue import deliveries, endings, lanes
from render.queue.keys import (
    CONSUMERS_KEY,
    HOLDING_PREFIX,
    IN_FLIGHT_KEY,
    LANE_GROUP,
    LANE_KEY,
    alive_key,
    job_key,
    lane_key,
    webhook_owed_key,
)
from render.queue.lane_scripts import CANCEL
from render.queue.records import JOB_RECORD_TTL_SECONDS, Absences, keep_job_records_for
from service.settings import ServiceSettings
from tests.support.jobs import recorded_job, waiting_job

REGION_LANE = lane_key("eu")


def offer(connection: redis.Redis, reference: str, answer: str = lanes.SYNC, lane: str = LANE_KEY,
          room: int = 100, org: str = "o", job_class: str | None = None) -> int:
    """Offer a job as the API does (with its record); 1 when added, 0 when refused."""
    job = recorded_job(reference, org) if answer == lanes.ASYNC else waiting_job(reference, org)
    payload = orjson.dumps(job.to_json()).decode()
    job_class = job_class or (lanes.BATCH if answer == lanes.ASYNC else lanes.INTERACTIVE)
    keys, args = lanes.offer_call(lane, job, answer, job_class, room, {
        "status": "queued", "organisation": org, "payload": payload})
    return int(lanes.OFFER.on(connection)(keys=keys, args=args)[0])


def stream(org: str = "o", job_class: str = lanes.INTERACTIVE, lane: str = LANE_KEY) -> str:
    return f"{lane}:{job_class}:{org}"


def beating(connection: redis.Redis, *workers: str) -> None:
    for worker in workers:
        connection.set(alive_key(worker), "1", ex=30)


def test_a_job_handed_to_a_worker_gone_before_starting_it_is_offered_again_and_started_once(
        connection: redis.Redis) -> None:
    assert offer(connection, "job-1") == 1
    beating(connection, "paused", "other")
    [taken] = lanes.take(connection, "paused", [LANE_KEY], 1)
    assert taken.reference == "job-1" and taken.answer == lanes.SYNC
    absences = Absences(grace_seconds=0)
    assert lanes.sweep(connection, [LANE_KEY], absences) == 0, "a beating worker keeps what it holds"
    assert lanes.take(connection, "other", [LANE_KEY], None) == [], "a held job goes to no one else"

    connection.delete(alive_key("paused"))  # its beats stop: killed, cut off or paused past the grace
    assert lanes.sweep(connection, [LANE_KEY], absences) == 1
    [again] = lanes.take(connection, "other", [LANE_KEY], 1)
    assert again.reference == "job-1" and again.entry != taken.entry
    assert lanes.start(connection, "other", again)
    assert not lanes.start(connection, "paused", taken), "the paused worker wakes up: the job is not its own"
    record = connection.hgetall(job_key("job-1"))
    assert (record[b"status"], record[b"worker"], record[b"entry"]) == (b"rendering", b"other", again.entry.encode())
    lanes.done(connection, "other", again)
    assert not connection.exists(stream()), "an organisation's stream goes once it is empty"
    assert not connection.exists(HOLDING_PREFIX + "other") and not connection.exists(HOLDING_PREFIX + "paused")
    # The gone worker holds nothing now: the sweep forgot it; the live one is forgotten when it is gone too.
    assert connection.smembers(CONSUMERS_KEY) == {b"other"}


def test_a_sync_job_its_gone_worker_started_is_left_to_its_waiting_api(connection: redis.Redis) -> None:
    offer(connection, "sync-lost")
    beating(connection, "crashed")
    [taken] = lanes.take(connection, "crashed", [LANE_KEY], 1)
    assert lanes.start(connection, "crashed", taken)
    connection.delete(alive_key("crashed"))
    assert lanes.sweep(connection, [LANE_KEY], Absences(grace_seconds=0)) == 0
    assert connection.xlen(stream()) == 0, "no one renders it again: its client is told to retry"
    assert connection.hget(job_key("sync-lost"), "worker") == b"crashed"


def test_an_async_job_lost_with_its_worker_runs_again_once_then_fails_uncharged(connection: redis.Redis) -> None:
    offer(connection, "async-lost", answer=lanes.ASYNC)
    absences = Absences(grace_seconds=0)
    for worker in ("first", "second"):
        beating(connection, worker)
        [taken] = lanes.take(connection, worker, [LANE_KEY], 1)
        assert lanes.start(connection, worker, taken)
        assert connection.sismember(IN_FLIGHT_KEY, "async-lost"), "watched by the sweep of orphans"
        assert endings.sweep_orphans(connection, absences) == 0, "its worker beats"
        connection.delete(alive_key(worker))  # killed mid-render
        assert endings.sweep_orphans(connection, absences) == 0, "still on its lane: the lanes' sweep decides"
        offered = lanes.sweep(connection, [LANE_KEY], absences)
        if worker == "first":  # the first loss: offered again, as if never started
            assert offered == 1
            assert connection.hget(job_key("async-lost"), "status") == b"queued"
            assert not connection.sismember(IN_FLIGHT_KEY, "async-lost")
            assert endings.sweep_orphans(connection, absences) == 0
    # The second loss: off the lane, finished as failed by the sweep of orphans (a page that kills its
    # worker does not go on killing workers).
    assert offered == 0 and connection.xlen(stream(job_class=lanes.BATCH)) == 0
    assert endings.sweep_orphans(connection, absences) == 1
    record = connection.hgetall(job_key("async-lost"))
    assert record[b"status"] == b"failed" and b"internal_application_error" in record[b"error"]


def test_the_room_counts_jobs_not_yet_handed_out_and_the_first_lane_comes_first(connection: redis.Redis) -> None:
    assert offer(connection, "early", room=2) == 1
    assert offer(connection, "common", room=2) == 1
    assert offer(connection, "refused", room=2) == 0, "one organisation alone: its share is the whole room"
    assert not connection.exists(job_key("refused")), "a refused job leaves no record"
    beating(connection, "w")
    [first] = lanes.take(connection, "w", [REGION_LANE, LANE_KEY], 1)
    assert first.reference == "early"
    assert offer(connection, "another", room=2) == 1, "the handed-out one does not count"
    assert offer(connection, "one-too-many", room=2) == 0
    assert offer(connection, "regional", lane=REGION_LANE, room=2) == 1, "each lane has its room"
    [second] = lanes.take(connection, "w", [REGION_LANE, LANE_KEY], 1)
    assert second.reference == "regional", "a region's lane before the common one"


def test_jobs_queued_before_the_hand_off_was_fair_are_still_served_and_swept(connection: redis.Redis) -> None:
    """The lane's own stream, as the hand-off of one stream a lane left it at an upgrade: read after the
    organisations' streams, and what a gone worker held there offered again."""
    connection.xgroup_create(LANE_KEY, LANE_GROUP, id="0", mkstream=True)
    connection.xadd(LANE_KEY, {"kind": lanes.SYNC, "reference": "old-1", "job": "{}"})
    connection.xadd(LANE_KEY, {"kind": lanes.SYNC, "reference": "old-2", "job": "{}"})
    offer(connection, "new")
    beating(connection, "w", "gone")
    assert [lanes.take(connection, "w", [LANE_KEY], None)[0].reference for _ in range(2)] == ["new", "old-1"]
    [held] = lanes.take(connection, "gone", [LANE_KEY], None)
    assert held.reference == "old-2" and held.lane == LANE_KEY
    connection.delete(alive_key("gone"))
    assert lanes.sweep(connection, [LANE_KEY], Absences(grace_seconds=0)) == 1
    [again] = lanes.take(connection, "w", [LANE_KEY], None)
    assert again.reference == "old-2" and lanes.start(connection, "w", again)
    lanes.done(connection, "w", again)
    assert connection.exists(LANE_KEY), "the lane's own stream is never deleted"


def test_a_redis_that_lost_its_data_takes_new_work_at_once(connection: redis.Redis) -> None:
    offer(connection, "before-the-loss")
    connection.flushdb()
    offer(connection, "after-the-loss")
    [taken] = lanes.take(connection, "w", [LANE_KEY], 1)
    assert taken.reference == "after-the-loss"
    assert lanes.take(connection, "w", [LANE_KEY], None) == []


def test_a_surplus_entry_given_back_goes_to_another_worker(connection: redis.Redis) -> None:
    offer(connection, "surplus")
    [taken] = lanes.take(connection, "w1", [LANE_KEY], 1)
    lanes.give_back(connection, "w1", taken)
    [again] = lanes.take(connection, "w2", [LANE_KEY], 1)
    assert again.reference == "surplus" and lanes.start(connection, "w2", again)


def test_a_job_finished_twice_owes_one_webhook_delivery(connection: redis.Redis) -> None:
    order = WebhookOrder(url="http://receiver.test/hook", sign=True, errors=False, schedule=[1, 2], timeout=5)
    job = recorded_job("twice", webhook=order)
    result = JobResult("twice", ok=True)
    deliveries.owe(connection, job, result)
    deliveries.owe(connection, job, result)  # a worker thought lost comes back and finishes it again
    assert connection.lrange("rq:queue:webhooks", 0, -1) == [b"webhook-twice"]
    assert connection.hget(job_key("twice"), "webhook") == b"pending"


def test_job_records_live_as_long_as_the_setting_says(connection: redis.Redis) -> None:
    keep_job_records_for(120)  # SCREENSHOT_JOB_RECORD_TTL=120
    try:
        offer(connection, "short-lived")
        [taken] = lanes.take(connection, "w", [LANE_KEY], 1)
        assert lanes.start(connection, "w", taken)
        assert 0 < connection.ttl(job_key("short-lived")) <= 120
        order = WebhookOrder(url="http://receiver.test/hook", sign=True, errors=False, schedule=[], timeout=5)
        deliveries.owe(connection, recorded_job("short-lived", webhook=order), JobResult("short-lived", ok=True))
        assert 0 < connection.ttl(webhook_owed_key("short-lived")) <= 120
    finally:
        keep_job_records_for(JOB_RECORD_TTL_SECONDS)
    assert ServiceSettings.model_fields["job_record_ttl"].default == JOB_RECORD_TTL_SECONDS == 7 * 86400


def cancel(connection: redis.Redis, reference: str) -> int:
    return int(CANCEL.on(connection)(keys=[job_key(reference)]))


def test_cancel_and_start_of_one_job_exactly_one_wins_in_either_order(connection: redis.Redis) -> None:
    """DELETE /jobs/{reference} (CANCEL) and a worker's START look at the same record: cancelled first, the
    worker is told CANCELLED and never marks it rendering; started first, the cancel is refused and the job runs.
    A synchronous job (no payload) and a monitor's run are not cancelled by reference."""
    assert offer(connection, "cancel-first", answer=lanes.ASYNC) == 1
    [taken] = lanes.take(connection, "w", [LANE_KEY], 1)
    assert cancel(connection, "cancel-first") == 1
    assert lanes.start(connection, "w", taken) == lanes.Start.CANCELLED
    record = connection.hgetall(job_key("cancel-first"))
    assert record[b"status"] == b"cancelled" and b"payload" not in record and b"worker" not in record
    assert cancel(connection, "cancel-first") == 0  # once
    lanes.done(connection, "w", taken)

    assert offer(connection, "start-first", answer=lanes.ASYNC) == 1
    [taken] = lanes.take(connection, "w", [LANE_KEY], 1)
    assert lanes.start(connection, "w", taken) == lanes.Start.STARTED
    assert cancel(connection, "start-first") == 0
    assert connection.hget(job_key("start-first"), "status") == b"rendering"
    lanes.done(connection, "w", taken)

    assert offer(connection, "sync", answer=lanes.SYNC) == 1
    connection.hdel(job_key("sync"), "payload")  # as the API records a synchronous job
    assert cancel(connection, "sync") == 0
    assert offer(connection, "run", answer=lanes.ASYNC) == 1
    connection.hset(job_key("run"), "monitor", "m1")
    assert cancel(connection, "run") == -1 and connection.hget(job_key("run"), "status") == b"queued"
