"""The fairness of the hand-off (render.queue.lanes) on a real redis-server: which job a free worker is handed
(organisations in turn, each one's own jobs in order, interactive before batch without starving batch, quick before
heavy without keeping heavy waiting long), and who may add a job to a full lane (each organisation its share)."""

from __future__ import annotations

from collections import Counter

import redis

from render.queue import lanes
from render.queue.keys import LANE_KEY, QUEUE_WAIT_PREFIX, job_key
from render.queue.redis_client import text
from tests.support.jobs import waiting_job
from tests.unit.test_lanes import offer

INTERACTIVE, HEAVY, BATCH = lanes.INTERACTIVE, lanes.HEAVY, lanes.BATCH


def handed_out(connection: redis.Redis, count: int | None = None) -> list[str]:
    """The references a worker is handed, in order, serving each (until the lane is empty, or `count`)."""
    order: list[str] = []
    while count is None or len(order) < count:
        found = lanes.take(connection, "w", [LANE_KEY], None)
        if not found:
            break
        lanes.done(connection, "w", found[0])
        order.append(found[0].reference)
    return order


def test_a_flood_waits_behind_every_other_organisations_next_job(connection: redis.Redis) -> None:
    for n in range(6):
        offer(connection, f"noisy-{n}", org="noisy", job_class=BATCH)
    for org, count in (("quiet1", 3), ("quiet2", 1)):
        for n in range(count):
            offer(connection, f"{org}-{n}", org=org, job_class=BATCH)
    assert handed_out(connection) == [
        "noisy-0", "quiet1-0", "quiet2-0",  # in turn: each organisation's next job, ties by name
        "noisy-1", "quiet1-1",
        "noisy-2", "quiet1-2",
        "noisy-3", "noisy-4", "noisy-5"]  # each one's own jobs in the order it sent them
    assert connection.llen(f"{LANE_KEY}:backlog") == 0 and not connection.exists(f"{LANE_KEY}:waiting")
    assert not connection.exists(f"{LANE_KEY}:ready:{BATCH}")
    assert not list(connection.scan_iter(f"{LANE_KEY}:{BATCH}:*")), "every stream gone once empty"


def test_an_organisation_back_from_idle_gets_no_credit_for_its_idle_time(connection: redis.Redis) -> None:
    for n in range(12):
        offer(connection, f"busy-{n}", org="busy", job_class=BATCH)
    assert handed_out(connection, 8) == [f"busy-{n}" for n in range(8)]
    for n in range(4):
        offer(connection, f"back-{n}", org="back", job_class=BATCH)
    # Next in turn (it waited least), then no more than its turn: not its four in a row for the turns it missed.
    # The organisations' times tie after its first job (ties go by name).
    assert handed_out(connection) == ["back-0", "back-1", "busy-8", "back-2", "busy-9", "back-3", "busy-10",
                                      "busy-11"]


def test_interactive_work_goes_first_and_batch_work_still_gets_every_fourth_turn(connection: redis.Redis) -> None:
    for n in range(3):
        offer(connection, f"batch-{n}", org="o", job_class=BATCH)
    for n in range(2):
        offer(connection, f"waiting-{n}", org="o", job_class=INTERACTIVE)
    assert handed_out(connection) == ["waiting-0", "waiting-1", "batch-0", "batch-1", "batch-2"], \
        "the same organisation's waiting client before its own batch"

    for n in range(40):  # a steady interactive load beside a batch backlog
        offer(connection, f"i-{n}", org=f"i{n % 3}", job_class=INTERACTIVE)
        offer(connection, f"b-{n}", org="batch", job_class=BATCH)
    first = handed_out(connection, 40)
    classes = Counter(reference.split("-")[0] for reference in first)
    assert classes == {"i": 30, "b": 10}, "batch progresses: a quarter of the turns while both have work"
    runs = "".join(reference[0] for reference in first).split("b")
    assert max(len(run) for run in runs) <= lanes.BATCH_EVERY - 1, first


def test_quick_captures_go_before_heavy_ones_for_a_while_and_no_longer(connection: redis.Redis) -> None:
    import time

    from render.queue.lane_scripts import HEAVY_PATIENCE_MS

    for n in range(2):
        offer(connection, f"heavy-{n}", org="o", job_class=HEAVY)
    offer(connection, "batch-0", org="o", job_class=BATCH)
    for n in range(2):
        offer(connection, f"quick-{n}", org="o", job_class=INTERACTIVE)
    offer(connection, "quick-other", org="other", job_class=INTERACTIVE)
    assert handed_out(connection) == ["quick-0", "quick-other", "quick-1", "batch-0", "heavy-0", "heavy-1"], \
        "offered just before them, the heavy ones wait; batch keeps its every fourth turn"

    offer(connection, "heavy-old", org="o", job_class=HEAVY)
    time.sleep(HEAVY_PATIENCE_MS / 1000 + 0.1)
    offer(connection, "quick-late", org="other", job_class=INTERACTIVE)
    assert handed_out(connection) == ["heavy-old", "quick-late"], "a heavy job waits its patience, no longer"


def test_a_heavy_capture_keeps_the_interactive_reserve_as_a_quick_one_does(connection: redis.Redis) -> None:
    import time

    from render.queue.keys import WORKERS_SEEN_KEY

    connection.zadd(WORKERS_SEEN_KEY, {"w1": time.time(), "w2": time.time()})
    for n in range(2):
        offer(connection, f"batch-{n}", org="noisy", job_class=BATCH)
    offer(connection, "heavy", org="quiet", job_class=HEAVY)
    [first] = lanes.take(connection, "w1", [LANE_KEY], None, interactive_reserve=0.5)
    [second] = lanes.take(connection, "w2", [LANE_KEY], None, interactive_reserve=0.5)
    assert (first.reference, second.reference) == ("heavy", "batch-0") and second.reserved
    lanes.done(connection, "w1", first)
    assert lanes.take(connection, "w1", [LANE_KEY], None, interactive_reserve=0.5) == [], "kept for a client"
    assert first.home == LANE_KEY and first.job_class == HEAVY


def test_a_full_lane_is_shared_fairly_and_refuses_only_whoever_has_its_share(connection: redis.Redis) -> None:
    room = 12
    assert [offer(connection, f"a-{n}", org="a", room=room) for n in range(room)] == [1] * room
    reply = lanes.OFFER.on(connection)(*_call("a-12", "a", room))
    refused = lanes.Offered.from_reply(reply)
    assert (refused.added, refused.waiting, refused.share, refused.newly_noisy) == (False, 12, 12, True)
    assert not connection.exists(job_key("a-12")), "a refused job leaves no record"
    again = lanes.Offered.from_reply(lanes.OFFER.on(connection)(*_call("a-13", "a", room)))
    assert not again.added and not again.newly_noisy, "said once while it stays over its share"
    # Another organisation is never refused because the first filled the lane: it gets its share (12 / 2).
    assert [offer(connection, f"b-{n}", org="b", room=room) for n in range(7)] == [1] * 6 + [0]
    # A third: 12 / 3 each, and those over it (a, b) stay refused.
    assert [offer(connection, f"c-{n}", org="c", room=room) for n in range(5)] == [1] * 4 + [0]
    assert offer(connection, "a-14", org="a", room=room) == 0 and offer(connection, "b-7", org="b", room=room) == 0
    assert connection.llen(f"{LANE_KEY}:backlog") == room + 6 + 4 <= 2 * room

    # Each is said to be back once drained to half its share or under (12 / 3 = 4 each: 2 waiting at most).
    assert lanes.quieted(connection, [LANE_KEY], room) == []
    while int(connection.hget(f"{LANE_KEY}:waiting", "a") or 0) > 2:
        handed_out(connection, 1)
    assert sorted(lanes.quieted(connection, [LANE_KEY], room)) == ["a", "b", "c"]
    assert lanes.quieted(connection, [LANE_KEY], room) == [], "told once"


def test_each_hand_off_counts_the_wait_of_its_class(connection: redis.Redis) -> None:
    offer(connection, "i", job_class=INTERACTIVE)
    offer(connection, "h", job_class=HEAVY)
    offer(connection, "b", job_class=BATCH)
    taken = handed_out(connection)
    assert taken == ["i", "h", "b"]
    for job_class in (INTERACTIVE, HEAVY, BATCH):
        histogram = {text(k): float(v) for k, v in connection.hgetall(QUEUE_WAIT_PREFIX + job_class).items()}
        assert histogram["count"] == 1 and 0 <= histogram["sum"] < 5 and histogram["60"] == 1


def _call(reference: str, org: str, room: int) -> tuple[list[str], list[object]]:
    job = waiting_job(reference, org)
    keys, args = lanes.offer_call(LANE_KEY, job, lanes.SYNC, INTERACTIVE, room, {"status": "queued"})
    return keys, args


def test_while_interactive_work_comes_batch_leaves_a_worker_free_for_it(connection: redis.Redis) -> None:
    """SCREENSHOT_INTERACTIVE_RESERVE: with two workers seen and a client's capture offered lately, batch work
    may occupy one worker only; the other stays free for the next interactive capture."""
    import time

    from render.queue.keys import WORKERS_SEEN_KEY

    connection.zadd(WORKERS_SEEN_KEY, {"w1": time.time(), "w2": time.time()})
    for n in range(3):
        offer(connection, f"batch-{n}", org="noisy", job_class=BATCH)
    offer(connection, "waiting", org="quiet", job_class=INTERACTIVE)  # a client's capture: the window opens
    [first] = lanes.take(connection, "w1", [LANE_KEY], None, interactive_reserve=0.25)
    assert first.reference == "waiting" and not first.reserved
    [second] = lanes.take(connection, "w2", [LANE_KEY], None, interactive_reserve=0.25)
    assert second.reference == "batch-0", "one worker for batch"
    assert second.reserved, "taken while the reserve is in force: kept off its CPUs (render.worker.cpus)"
    lanes.done(connection, "w1", first)
    assert lanes.take(connection, "w1", [LANE_KEY], None, interactive_reserve=0.25) == [], "the other kept free"
    assert lanes.take(connection, "w1", [LANE_KEY], 0.05, interactive_reserve=0.25) == [], "held back, polled"
    offer(connection, "another", org="quiet", job_class=INTERACTIVE)
    [third] = lanes.take(connection, "w1", [LANE_KEY], None, interactive_reserve=0.25)
    assert third.reference == "another", "found free"
    lanes.done(connection, "w1", third)
    lanes.done(connection, "w2", second)  # the batch job done: batch may take a worker again
    [fourth] = lanes.take(connection, "w2", [LANE_KEY], None, interactive_reserve=0.25)
    assert fourth.reference == "batch-1"
    # No reserve asked for, or a fleet of one: batch takes any worker.
    [fifth] = lanes.take(connection, "w1", [LANE_KEY], None, interactive_reserve=0)
    assert fifth.reference == "batch-2" and not fifth.reserved
    lanes.done(connection, "w1", fifth)
    lanes.done(connection, "w2", fourth)
    assert int(connection.get(f"{LANE_KEY}:running:{BATCH}") or 0) == 0
    connection.zrem(WORKERS_SEEN_KEY, "w2")
    offer(connection, "batch-3", org="noisy", job_class=BATCH)
    offer(connection, "batch-4", org="noisy", job_class=BATCH)
    [alone] = lanes.take(connection, "w1", [LANE_KEY], None, interactive_reserve=0.25)
    assert alone.reference == "batch-3", "a lone worker is never held back"
    assert not alone.reserved


def test_while_quick_captures_come_heavy_and_batch_work_leave_a_worker_free_for_them(
        connection: redis.Redis) -> None:
    import time

    from render.queue.keys import WORKERS_SEEN_KEY

    connection.zadd(WORKERS_SEEN_KEY, {"w1": time.time(), "w2": time.time()})
    offer(connection, "quick", org="o", job_class=INTERACTIVE)
    for n in range(3):
        offer(connection, f"heavy-{n}", org="o", job_class=HEAVY)
    offer(connection, "batch", org="b", job_class=BATCH)
    [first] = lanes.take(connection, "w1", [LANE_KEY], None, interactive_reserve=0.25)
    [second] = lanes.take(connection, "w2", [LANE_KEY], None, interactive_reserve=0.25)
    assert (first.reference, second.reference) == ("quick", "heavy-0")
    lanes.done(connection, "w1", first)
    assert lanes.take(connection, "w1", [LANE_KEY], None, interactive_reserve=0.25) == [], \
        "neither heavy nor batch work takes the last worker while quick captures come"
    offer(connection, "quick-2", org="o", job_class=INTERACTIVE)
    [third] = lanes.take(connection, "w1", [LANE_KEY], None, interactive_reserve=0.25)
    assert third.reference == "quick-2", "found free"
    lanes.done(connection, "w1", third)
    lanes.done(connection, "w2", second)
    [fourth] = lanes.take(connection, "w2", [LANE_KEY], None, interactive_reserve=0.25)
    assert fourth.reference == "heavy-1"
    # No reserve asked for: heavy and batch work take any worker (batch its every fourth turn).
    [fifth] = lanes.take(connection, "w1", [LANE_KEY], None, interactive_reserve=0)
    assert fifth.reference == "batch"
    lanes.done(connection, "w1", fifth)
    [sixth] = lanes.take(connection, "w1", [LANE_KEY], None, interactive_reserve=0)
    assert sixth.reference == "heavy-2"
    for worker, taken in (("w1", sixth), ("w2", fourth)):
        lanes.done(connection, worker, taken)
    assert int(connection.get(f"{LANE_KEY}:running:{HEAVY}") or 0) == 0
