"""The hand-off of capture jobs from the API to the workers: fair between organisations, interactive work before
batch work, and a job never rendered twice nor lost on its way. docs/architecture.md ("The hand-off") describes
it; the scripts are in render.queue.lane_scripts, this module calls them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import orjson
import redis

from render.contract.wire import JobRequest
from render.queue.keys import CONSUMERS_KEY, HOLDING_PREFIX, IN_FLIGHT_KEY, LANE_GROUP, alive_key, job_key
from render.queue.lane_scripts import (
    ASYNC,
    BATCH,
    CLASSES,
    DONE,
    HEAVY,
    INTERACTIVE,
    OFFER,
    START,
    SYNC,
    TAKE,
    TAKE_BACK,
    WAITING,
    Offer,
    Start,
    TakeBack,
)
from render.queue.records import Absences, job_record_ttl
from render.queue.redis_client import text

__all__ = ["ASYNC", "BATCH", "HEAVY", "INTERACTIVE", "OFFER", "SYNC", "WAITING", "Offered", "Start", "Taken"]
log = logging.getLogger(__name__)
BATCH_EVERY = 4  # while batch work and a client's both wait, every 4th pick is batch's: a quarter of the fleet at least
SWEEP_BATCH = 100  # pending entries read at once per gone worker and stream
HELD_BACK_POLL_SECONDS = 0.25  # how soon a worker held back from batch work (for interactive work) looks again


def offer_call(lane: str, job: JobRequest, answer: str, job_class: str, max_queue: int,
               record: dict[str, str] | None) -> tuple[list[str], list[Any]]:
    """The keys and arguments of OFFER for `job` (and its `record`, when given), for either client's script.
    `answer`: SYNC (its API waits) or ASYNC (its worker finishes it)."""
    fields = [part for pair in (record or {}).items() for part in pair]
    return ([job_key(job.reference)],
            [lane, job_class, job.organisation, max_queue, answer, job.reference,
             orjson.dumps(job.to_json()).decode(), job_record_ttl(), *fields])


@dataclass(frozen=True)
class Offered:
    """What OFFER answered: added, or refused because the lane is full and the organisation has its share."""

    added: bool
    waiting: int = 0  # the organisation's jobs waiting, when refused
    share: int = 0  # its share of the lane, when refused
    newly_noisy: bool = False  # the first refusal since it was last under its share

    @classmethod
    def from_reply(cls, reply: Any) -> Offered:
        if int(reply[0]) == Offer.ADDED:
            return cls(True)
        return cls(False, int(reply[1]), int(reply[2]), int(reply[3]) == 1)


@dataclass(frozen=True)
class Taken:
    """An entry a worker read from a lane."""

    lane: str  # the stream it was read from
    entry: str  # the stream entry's id
    answer: str  # SYNC or ASYNC
    reference: str
    job: str  # JobRequest JSON
    job_class: str = INTERACTIVE
    waited: float = 0.0  # seconds between its offer and its hand-off
    # A batch job taken while interactive work keeps coming (the reserve in force): the worker renders it off the
    # CPUs kept for interactive work (render.worker.cpus).
    reserved: bool = False

    @property
    def home(self) -> str:
        """The lane the entry belongs to (its stream's lane)."""
        for job_class in CLASSES:
            marker = f":{job_class}:"
            if marker in self.lane:
                return self.lane.rsplit(marker, 1)[0]
        return self.lane


def _taken(reply: Any) -> Taken | None:
    if not reply or len(reply) < 4:
        return None
    stream, entry, flat, waited = reply[:4]
    values = {text(k): text(v) for k, v in zip(flat[::2], flat[1::2], strict=True)}
    # `kind`: what an entry offered by an earlier version calls its answer
    answer = values.get("answer") or values.get("kind", "")
    return Taken(text(stream), text(entry), answer, values.get("reference", ""),
                 values.get("job", ""), values.get("class", INTERACTIVE), float(text(waited)),
                 len(reply) > 4 and int(reply[4]) == 1)


def take(connection: redis.Redis, worker: str, lanes: list[str], block_seconds: float | None,
         interactive_reserve: float = 0.0) -> list[Taken]:
    """The next entry for `worker` (the fair pick, the first lane first); when there is none, waiting up to
    `block_seconds` on the lanes' bells for one (None: only what is there now). `interactive_reserve`: the share
    of the fleet kept free for interactive work while it comes (SCREENSHOT_INTERACTIVE_RESERVE); a worker held back
    from batch work looks again every HELD_BACK_POLL_SECONDS."""
    script = TAKE.on(connection)
    args: list[str | int | float] = [worker, BATCH_EVERY, interactive_reserve, *lanes]
    reply = script(args=args)
    found = _taken(reply)
    if found is None and block_seconds is not None:
        wait = min(block_seconds, HELD_BACK_POLL_SECONDS) if reply else block_seconds
        connection.blpop([f"{lane}:bell" for lane in lanes], timeout=max(0.01, wait))
        found = _taken(script(args=args))
    return [found] if found is not None else []


def held(connection: redis.Redis, lane: str, entry: str, worker: str) -> bool:
    """Whether `worker` still holds entry `entry` of stream `lane` (the sweep has not taken it back)."""
    try:
        found = connection.xpending_range(lane, LANE_GROUP, entry, entry, 1)
    except redis.ResponseError:
        return False
    return bool(found) and text(found[0]["consumer"]) == worker  # type: ignore[arg-type]


def start(connection: redis.Redis, worker: str, taken: Taken) -> Start:
    """Mark the job `rendering` by `worker`, if the entry is still its own and its owner has not cancelled it."""
    return Start(int(START.on(connection)(keys=[taken.lane, job_key(taken.reference), IN_FLIGHT_KEY],
                                          args=[taken.entry, worker, job_record_ttl(), taken.reference,
                                                "1" if taken.answer == ASYNC else "0"])))


def done(connection: redis.Redis, worker: str, taken: Taken) -> None:
    """The entry is served (or could not be): off its stream."""
    DONE.on(connection)(keys=[taken.lane], args=[taken.entry, worker, taken.job_class, taken.home])


def give_back(connection: redis.Redis, worker: str, taken: Taken) -> None:
    """Offer again an entry `worker` took but will not render."""
    TAKE_BACK.on(connection)(keys=[taken.lane, job_key(taken.reference), IN_FLIGHT_KEY],
                             args=[taken.entry, worker, taken.reference, taken.home])


def quieted(connection: redis.Redis, lanes: list[str], max_queue: int) -> list[str]:
    """The organisations refused for their share (OFFER's noisy set) that are back at half their share or under
    it, taken off the set: each is returned to one caller only, however many APIs sweep at once."""
    found = []
    for lane in lanes:
        noisy = [text(member) for member in connection.smembers(f"{lane}:noisy")]
        if not noisy:
            continue
        waiting = {text(org): int(count) for org, count in connection.hgetall(f"{lane}:waiting").items()}
        share = max(1, max_queue // max(1, len(waiting)))
        found += [org for org in noisy if waiting.get(org, 0) <= share // 2 and connection.srem(f"{lane}:noisy", org)]
    return found


def _take_back_all(connection: redis.Redis, stream: str, worker: str) -> tuple[int, bool]:
    """Take back what gone `worker` holds in `stream`: how many were offered again, and whether it holds
    nothing there any more."""
    take_back = TAKE_BACK.on(connection)
    try:
        pending = connection.xpending_range(stream, LANE_GROUP, "-", "+", SWEEP_BATCH, consumername=worker)
    except redis.ResponseError:
        return 0, True  # no such stream or group (any more)
    offered = 0
    home = Taken(stream, "", "", "", "").home
    for entry in pending:
        entry_id = text(entry["message_id"])  # type: ignore[arg-type]
        fields = connection.xrange(stream, entry_id, entry_id)
        values = {text(k): text(v) for k, v in ((fields[0][1] or {}) if fields else {}).items()}
        reference = values.get("reference", "")
        outcome = TakeBack(int(take_back(keys=[stream, job_key(reference), IN_FLIGHT_KEY],
                                         args=[entry_id, worker, reference, home])))
        if outcome in (TakeBack.OFFERED_AGAIN, TakeBack.OFFERED_AFTER_LOSS):
            offered += 1
            log.warning("job %s was handed to worker %s, which is gone %s; offered again", reference, worker,
                        "and never started it" if outcome == TakeBack.OFFERED_AGAIN
                        else "while rendering it (first loss)")
    return offered, len(pending) < SWEEP_BATCH


def sweep(connection: redis.Redis, lanes: list[str], absences: Absences) -> int:
    """Take back every entry held by a worker proven gone (offered again when it never started the job) and
    forget gone workers that hold nothing. Run by every API every few seconds; safe to run at once by several.
    `lanes`: the lanes' own streams, swept too for entries held since before the hand-off was fair. Returns how
    many entries it offered again."""
    offered = 0
    for raw in connection.smembers(CONSUMERS_KEY):
        worker = text(raw)
        if not absences.gone(worker, bool(connection.exists(alive_key(worker)))):
            continue
        for stream in sorted(text(name) for name in connection.smembers(HOLDING_PREFIX + worker)):
            count, cleared = _take_back_all(connection, stream, worker)
            offered += count
            if cleared:
                connection.srem(HOLDING_PREFIX + worker, stream)
                try:
                    connection.xgroup_delconsumer(stream, LANE_GROUP, worker)
                except redis.ResponseError:
                    pass
        if not connection.exists(HOLDING_PREFIX + worker):
            connection.srem(CONSUMERS_KEY, worker)
    for lane in lanes:  # the lanes' own streams
        try:
            consumers = connection.xinfo_consumers(lane, LANE_GROUP)
        except redis.ResponseError:
            continue
        for consumer in consumers:
            worker = text(consumer["name"])
            if absences.gone(worker, bool(connection.exists(alive_key(worker)))):
                count, cleared = _take_back_all(connection, lane, worker)
                offered += count
                if cleared:
                    connection.xgroup_delconsumer(lane, LANE_GROUP, worker)
    return offered
