"""Monthly quota and concurrency per organisation, reserved and settled atomically in Redis.

A job holds a concurrency slot (a member of `slots:<org>`, scored by its expiry) from reservation
until its result is final. In-flight slots count against the quota too, so concurrent requests
can never overshoot it. Only successes are charged, and only by whoever removes the slot first:
if the API gave up waiting (and freed the slot), a late success charges nothing. Expired slots
are swept on every reservation, so a crashed process can never leak one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

import redis
import redis.asyncio as aioredis

from service.errors import ConcurrencyLimitReached, ScreenshotsLimitReached
from service.organisations import Organisation

USAGE_KEEP_SECONDS = 400 * 86400  # a month's counter is kept a little over a year

_RESERVE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local active = redis.call('ZCARD', KEYS[1])
if active >= tonumber(ARGV[4]) then return -1 end
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
if used + active >= tonumber(ARGV[5]) then return -2 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
return 1
"""

_SETTLE = """
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if removed == 1 and ARGV[2] == '1' then
  redis.call('INCR', KEYS[2])
  redis.call('EXPIRE', KEYS[2], ARGV[3])
  return 1
end
return 0
"""


def _slots_key(org_id: str) -> str:
    return f"slots:{org_id}"


def _usage_key(org_id: str, now: float) -> str:
    return f"usage:{org_id}:{datetime.fromtimestamp(now, UTC):%Y-%m}"


@dataclass(frozen=True)
class Usage:
    """The spec's usage record."""

    total: int
    available: int
    used: int
    concurrency_limit: int
    concurrency_remaining: int
    concurrency_reset: int

    def to_json(self) -> dict[str, object]:
        return {
            "total": self.total, "available": self.available, "used": self.used,
            "concurrency": {"limit": self.concurrency_limit, "remaining": self.concurrency_remaining,
                            "reset": self.concurrency_reset},
        }


def settle_now(connection: redis.Redis, org_id: str, job_id: str, *, success: bool) -> bool:
    """`QuotaKeeper.settle` for synchronous callers: a worker finishing a job nobody waits for."""
    now = time.time()
    charged = connection.register_script(_SETTLE)(
        keys=[_slots_key(org_id), _usage_key(org_id, now)], args=[job_id, int(success), USAGE_KEEP_SECONDS])
    return bool(charged)


class QuotaKeeper:
    """Reserve before enqueueing, settle when the outcome is final."""

    def __init__(self, connection: aioredis.Redis) -> None:
        self._redis = connection
        self._reserve = connection.register_script(_RESERVE)
        self._settle = connection.register_script(_SETTLE)

    async def reserve(self, org: Organisation, job_id: str, hold_seconds: float) -> None:
        """Take a concurrency slot for `job_id`, or raise the limit error."""
        now = time.time()
        outcome = await self._reserve(
            keys=[_slots_key(org.id), _usage_key(org.id, now)],
            args=[now, now + hold_seconds, job_id, org.concurrency, org.quota])
        if outcome == -1:
            raise ConcurrencyLimitReached(
                f"All {org.concurrency} concurrent requests of this organisation are in use; retry when "
                "one finishes (GET /v1/screenshot/usage shows when), or ask for a higher limit.")
        if outcome == -2:
            raise ScreenshotsLimitReached(
                f"The monthly quota of {org.quota} screenshots is used up; it resets at the start of the "
                "next month (UTC).")

    async def settle(self, org: Organisation, job_id: str, *, success: bool) -> bool:
        """Free the slot; charge one screenshot when successful. True when charged."""
        now = time.time()
        charged = await self._settle(keys=[_slots_key(org.id), _usage_key(org.id, now)],
                                     args=[job_id, int(success), USAGE_KEEP_SECONDS])
        return bool(charged)

    async def usage(self, org: Organisation) -> Usage:
        """The usage record of GET /usage."""
        now = time.time()
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.get(_usage_key(org.id, now))
            pipe.zrangebyscore(_slots_key(org.id), now, "+inf", withscores=True)
            used_raw, slots = await pipe.execute()
        used = int(used_raw or 0)
        remaining = max(0, org.concurrency - len(slots))
        # When a slot is free now, "now"; else the earliest moment a held slot must free.
        next_free = now if remaining > 0 or not slots else min(score for _, score in slots)
        return Usage(total=org.quota, available=max(0, org.quota - used), used=used,
                     concurrency_limit=org.concurrency, concurrency_remaining=remaining,
                     concurrency_reset=int(next_free * 1_000_000_000))
