"""The hand-off of capture jobs from the API to the workers: one Redis stream a lane, read by the consumer
group of the workers, so that a job is never rendered twice and never lost on its way.

A job is an entry (`kind`: sync or async, `reference`, `job`: the JobRequest JSON) the API adds with
OFFER. A worker reads it with XREADGROUP, which hands the entry to that worker alone and writes down, in
the same step, that the worker holds it (the group's pending entries). Before rendering, the worker
STARTs it: one script that marks the job's record `rendering` by this worker only while the entry is
still its own. When the worker is done it acknowledges and deletes the entry.

A worker that holds an entry and is proven gone (its heartbeat absent longer than the grace: killed, its
host cut off, the process paused) loses it to TAKE_BACK, run by every API's sweeper: an entry it never
started is offered again (added anew at the end of the lane). An async job it started is offered once
more, marked `lost` (its record back to `queued`); lost a second time, it is the sweep of orphaned jobs
that ends it as failed and uncharged (render.queue.async_jobs). A sync job it started is answered by the
API waiting for it: `internal_application_error`, which the spec calls safe to retry. START and
TAKE_BACK are both scripts that look at the same pending entry, so exactly one of them wins: a worker that
wakes up after its job was taken back finds the entry no longer its own and leaves it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import orjson
import redis

from render.contract.wire import JobRequest
from render.queue.keys import IN_FLIGHT_KEY, LANE_GROUP, alive_key, job_key
from render.queue.records import Absences, job_record_ttl
from render.queue.redis_client import text

log = logging.getLogger(__name__)
SYNC, ASYNC = "sync", "async"  # before the scripts, which name them
SWEEP_BATCH = 100  # pending entries read at once per gone worker

# Entries of a lane not yet handed to a worker: every entry handed out is pending until it is deleted.
_WAITING = f"""
local function waiting(lane)
  local length = redis.call('XLEN', lane)
  if length == 0 then return 0 end
  local pending = redis.pcall('XPENDING', lane, '{LANE_GROUP}')
  if type(pending) == 'table' and pending.err == nil then return length - pending[1] end
  return length  -- no group yet: nothing handed out
end
"""

# KEYS: the lane, the job's record. ARGV: the most jobs that may wait, kind, reference, job, the record's
# lifetime, then the record's fields and values. 1 when added (and recorded), 0 when the lane is full.
OFFER = _WAITING + """
if waiting(KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('XADD', KEYS[1], '*', 'kind', ARGV[2], 'reference', ARGV[3], 'job', ARGV[4])
if #ARGV > 5 then
  redis.call('HSET', KEYS[2], unpack(ARGV, 6))
  redis.call('EXPIRE', KEYS[2], ARGV[5])
end
return 1
"""



def offer_call(lane: str, job: JobRequest, kind: str, max_queue: int, record: dict[str, str] | None
               ) -> tuple[list[str], list[Any]]:
    """The keys and arguments of OFFER for `job` (and its `record`, when given), for either client's script."""
    fields = [part for pair in (record or {}).items() for part in pair]
    return ([lane, job_key(job.reference)],
            [max_queue, kind, job.reference, orjson.dumps(job.to_json()).decode(), job_record_ttl(), *fields])


# KEYS: the lanes. The jobs waiting in all of them.
WAITING = _WAITING + """
local total = 0
for _, lane in ipairs(KEYS) do total = total + waiting(lane) end
return total
"""

_HELD_BY = f"""
local function held_by(lane, id, consumer)
  local held = redis.pcall('XPENDING', lane, '{LANE_GROUP}', id, id, 1)
  return type(held) == 'table' and held.err == nil and #held == 1 and held[1][2] == consumer
end
"""

# KEYS: the lane, the job's record, the in-flight set. ARGV: entry id, worker, the record's lifetime,
# reference, '1' for an async job (watched by the sweep of orphans). 1: the worker renders it; 0: not its own.
START = _HELD_BY + """
if not held_by(KEYS[1], ARGV[1], ARGV[2]) then return 0 end
redis.call('HSET', KEYS[2], 'status', 'rendering', 'worker', ARGV[2], 'lane', KEYS[1], 'entry', ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[3])
if ARGV[5] == '1' then redis.call('SADD', KEYS[3], ARGV[4]) end
return 1
"""

# KEYS: the lane, the job's record, the in-flight set. ARGV: entry id, the worker holding it, reference.
# 0: not held by that worker (any more). 2: it never started the job: offered again, as a new entry at the
# lane's end. 3: an async job it was rendering, lost for the first time: offered again (its record back to
# queued; nothing was charged, a webhook is owed once). 1: the entry is removed and the job left to whoever
# answers it (a sync job's waiting API; an async job lost twice, or finished, to the sweep of orphans).
TAKE_BACK = _HELD_BY + f"""
if not held_by(KEYS[1], ARGV[1], ARGV[2]) then return 0 end
local record = redis.call('HMGET', KEYS[2], 'worker', 'status')
local entry = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
redis.call('XACK', KEYS[1], '{LANE_GROUP}', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
if #entry == 0 then return 1 end
local fields = entry[1][2]
if record[1] ~= ARGV[2] then
  redis.call('XADD', KEYS[1], '*', unpack(fields))
  return 2
end
local kind, lost = nil, nil
for i = 1, #fields, 2 do
  if fields[i] == 'kind' then kind = fields[i + 1] elseif fields[i] == 'lost' then lost = fields[i + 1] end
end
if kind == '{ASYNC}' and record[2] == 'rendering' and not lost then
  redis.call('HSET', KEYS[2], 'status', 'queued')
  redis.call('HDEL', KEYS[2], 'worker', 'lane', 'entry')
  redis.call('SREM', KEYS[3], ARGV[3])
  table.insert(fields, 'lost')
  table.insert(fields, ARGV[2])
  redis.call('XADD', KEYS[1], '*', unpack(fields))
  return 3
end
return 1
"""


def held(connection: redis.Redis, lane: str, entry: str, worker: str) -> bool:
    """Whether `worker` still holds entry `entry` of `lane` (the sweep of lanes has not taken it back)."""
    try:
        found = connection.xpending_range(lane, LANE_GROUP, entry, entry, 1)
    except redis.ResponseError:
        return False
    return bool(found) and text(found[0]["consumer"]) == worker  # type: ignore[arg-type]


@dataclass(frozen=True)
class Taken:
    """An entry a worker read from a lane."""

    lane: str
    entry: str  # the stream entry's id
    kind: str
    reference: str
    job: str  # JobRequest JSON


def ensure_groups(connection: redis.Redis, lanes: list[str]) -> None:
    """The workers' group on each lane (and the lane), reading from the first entry: jobs offered before
    the group existed (a Redis that lost its data, a first start) are served too."""
    for lane in lanes:
        try:
            connection.xgroup_create(lane, LANE_GROUP, id="0", mkstream=True)
        except redis.ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise


def _entries(reply: object) -> list[Taken]:
    taken = []
    for lane, entries in reply or []:  # type: ignore[attr-defined]
        for entry, fields in entries:
            values = {text(k): text(v) for k, v in (fields or {}).items()}
            taken.append(Taken(text(lane), text(entry), values.get("kind", ""), values.get("reference", ""),
                               values.get("job", "")))
    return taken


def take(connection: redis.Redis, worker: str, lanes: list[str], block_seconds: float | None) -> list[Taken]:
    """The next entry for `worker`, the first lane first; blocking up to `block_seconds` (None: only what
    is there now). One entry, except when several lanes fill within the same moment of a blocking read:
    the caller gives back those it does not render now (`give_back`)."""
    try:
        for lane in lanes if block_seconds is None or len(lanes) > 1 else []:
            found = _entries(connection.xreadgroup(LANE_GROUP, worker, {lane: ">"}, count=1))
            if found:
                return found
        if block_seconds is None:
            return []
        return _entries(connection.xreadgroup(LANE_GROUP, worker, dict.fromkeys(lanes, ">"), count=1,
                                              block=max(1, int(block_seconds * 1000))))
    except redis.ResponseError as error:
        if "NOGROUP" not in str(error):
            raise
        ensure_groups(connection, lanes)  # Redis lost its data, or a lane is new
        return []


def start(connection: redis.Redis, worker: str, taken: Taken) -> bool:
    """Mark the job `rendering` by `worker`, if the entry is still its own (else another has it now)."""
    script = connection.register_script(START)
    return bool(script(keys=[taken.lane, job_key(taken.reference), IN_FLIGHT_KEY],
                       args=[taken.entry, worker, job_record_ttl(), taken.reference,
                             "1" if taken.kind == ASYNC else "0"]))


def done(connection: redis.Redis, taken: Taken) -> None:
    """The entry is served (or could not be): off the lane."""
    with connection.pipeline(transaction=True) as pipe:
        pipe.xack(taken.lane, LANE_GROUP, taken.entry)
        pipe.xdel(taken.lane, taken.entry)
        pipe.execute()


def give_back(connection: redis.Redis, worker: str, taken: Taken) -> None:
    """Offer again an entry `worker` took but will not render."""
    connection.register_script(TAKE_BACK)(keys=[taken.lane, job_key(taken.reference), IN_FLIGHT_KEY],
                                          args=[taken.entry, worker, taken.reference])


def sweep(connection: redis.Redis, lanes: list[str], absences: Absences) -> int:
    """Take back every entry held by a worker proven gone (offered again when it never started the job) and
    forget gone workers that hold nothing. Run by every API every few seconds; safe to run at once by
    several. Returns how many entries it offered again."""
    take_back = connection.register_script(TAKE_BACK)
    offered = 0
    for lane in lanes:
        try:
            consumers = connection.xinfo_consumers(lane, LANE_GROUP)
        except redis.ResponseError:
            continue  # no such lane or group (yet)
        for consumer in consumers:
            worker = text(consumer["name"])
            if not absences.gone(worker, bool(connection.exists(alive_key(worker)))):
                continue
            if not consumer["pending"]:
                connection.xgroup_delconsumer(lane, LANE_GROUP, worker)
                continue
            for held in connection.xpending_range(lane, LANE_GROUP, "-", "+", SWEEP_BATCH, consumername=worker):
                entry = text(held["message_id"])  # type: ignore[arg-type]
                found = _entries([(lane, connection.xrange(lane, entry, entry))])
                reference = found[0].reference if found else ""
                outcome = take_back(keys=[lane, job_key(reference), IN_FLIGHT_KEY], args=[entry, worker, reference])
                if outcome in (2, 3):
                    offered += 1
                    log.warning("job %s was handed to worker %s, which is gone %s; offered again", reference, worker,
                                "and never started it" if outcome == 2 else "while rendering it (first loss)")
    return offered
