"""The quota and concurrency ledger in Redis: the scripts that hold and settle a job's slot, shared by the
API (hold; settle what no worker finished) and the workers (settle every job they finish, with its result).

A job holds a concurrency slot (a member of `slots:<org>`, scored by its expiry) from its hold
until its result is final. In-flight slots count against the quota too, so concurrent requests
can never overshoot it. Only successes are charged, and only by whoever removes the slot first:
if the API gave up waiting (and freed the slot), a late success charges nothing. Expired slots
are swept on every hold, so a crashed process can never leak one; a slot Redis would not free as its request
ended (a failover) is freed uncharged by the API as soon as Redis takes writes again.
"""

from __future__ import annotations

import time
from enum import IntEnum

import redis

from render.queue.keys import slots_key, usage_key
from render.queue.scripts import LuaScript

USAGE_KEEP_SECONDS = 400 * 86400  # a month's counter is kept a little over a year



class Hold(IntEnum):
    """What HOLD answers."""

    QUOTA_USED_UP = -2  # the month's successes and the slots held reach the quota
    CONCURRENCY_FULL = -1  # every concurrency slot is held
    HELD = 1


HOLD = LuaScript(
    "HOLD", keys=["the organisation's slots (slots_key)", "this month's usage counter (usage_key)"],
    args=["now (UNIX seconds): slots held past it are expired", "the new slot's expiry (UNIX seconds)", "reference",
          "the organisation's concurrency", "its monthly quota"],
    returns="a Hold", body="""
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local active = redis.call('ZCARD', KEYS[1])
if active >= tonumber(ARGV[4]) then return -1 end
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
if used + active >= tonumber(ARGV[5]) then return -2 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
return 1
""")

SETTLE = LuaScript(
    "SETTLE", keys=["the organisation's slots (slots_key)", "this month's usage counter (usage_key)"],
    args=["reference", "'1' for a success (charged)", "the usage counter's lifetime in seconds"],
    returns="1 when it charged a screenshot (it removed the slot itself, and the job succeeded), else 0", body="""
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if removed == 1 and ARGV[2] == '1' then
  redis.call('INCR', KEYS[2])
  redis.call('EXPIRE', KEYS[2], ARGV[3])
  return 1
end
return 0
""")


def settle_now(connection: redis.Redis, org_id: str, job_id: str, *, success: bool) -> bool:
    """The API's settlement (QuotaKeeper.settle) for synchronous callers: a worker finishing a job nobody waits for."""
    now = time.time()
    charged = SETTLE.on(connection)(
        keys=[slots_key(org_id), usage_key(org_id, now)], args=[job_id, int(success), USAGE_KEEP_SECONDS])
    return bool(charged)


def settle_on(pipe: redis.client.Pipeline, org_id: str, job_id: str, *, success: bool) -> None:
    """`settle_now` queued on a pipeline: a worker settles the job it publishes in the same round trip (the
    API that waits for it then has nothing left to settle)."""
    now = time.time()
    SETTLE.queue(pipe, [slots_key(org_id), usage_key(org_id, now)], [job_id, int(success), USAGE_KEEP_SECONDS])
