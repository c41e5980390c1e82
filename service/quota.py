"""Monthly quota and concurrency per organisation, held and settled atomically in Redis by the ledger's scripts
(render.queue.ledger says how a slot lives)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import redis
import redis.asyncio as aioredis

from render.queue.keys import slots_key, usage_key
from render.queue.ledger import HOLD, SETTLE, USAGE_KEEP_SECONDS, Hold
from service.errors import ConcurrencyLimitReached, ScreenshotsLimitReached
from service.organisations import Organisation

log = logging.getLogger(__name__)

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


SLOT_MARGIN_SECONDS = 5  # a slot outlives its job's timeout and the API's wait by this much
# An async job may wait in its lane: its slot is held that much longer before it can expire.
ASYNC_QUEUE_ALLOWANCE_SECONDS = 600
# A slot Redis would not free (a failover, writes refused) is freed once it can, tried again this often at most, for
# as long as any slot can be held (after that, it has expired by itself).
FREE_LATER_FIRST_SECONDS = 0.25
FREE_LATER_MOST_SECONDS = 5.0
FREE_LATER_FOR_SECONDS = 3600


def slot_hold(timeout: float, grace: float, *, queued: bool = False) -> float:
    """How long a job's concurrency slot is held at most (it is freed at once when the job settles): its timeout,
    the API's result wait grace, and a margin, or the allowance for an async job's time in its lane."""
    return timeout + grace + (ASYNC_QUEUE_ALLOWANCE_SECONDS if queued else SLOT_MARGIN_SECONDS)


def refusal(org: Organisation, outcome: int) -> None:
    """The ledger's HOLD answer as the limit error it means (nothing when it holds the slot)."""
    if outcome == Hold.CONCURRENCY_FULL:
        raise ConcurrencyLimitReached(
            f"All {org.concurrency} concurrent requests of this organisation are in use; retry when "
            "one finishes (GET /v1/screenshot/usage shows when), or ask for a higher limit.")
    if outcome == Hold.QUOTA_USED_UP:
        raise ScreenshotsLimitReached(
            f"The monthly quota of {org.quota} screenshots is used up; it resets at the start of the "
            "next month (UTC).")


def hold_now(connection: redis.Redis, org: Organisation, job_id: str, hold_seconds: float) -> None:
    """`QuotaKeeper.hold` for synchronous callers (the deliverer starting a monitor's run)."""
    now = time.time()
    refusal(org, HOLD.on(connection)(
        keys=[slots_key(org.id), usage_key(org.id, now)],
        args=[now, now + hold_seconds, job_id, org.concurrency, org.quota]))


class QuotaKeeper:
    """Reserve before enqueueing, settle when the outcome is final."""

    def __init__(self, connection: aioredis.Redis) -> None:
        self._redis = connection
        self._hold = HOLD.on(connection)
        self._settle = SETTLE.on(connection)
        self._freeing: set[asyncio.Task[None]] = set()  # slots being freed once Redis takes writes again (settle)

    async def hold(self, org: Organisation, job_id: str, hold_seconds: float) -> None:
        """Take a concurrency slot for `job_id`, or raise the limit error."""
        now = time.time()
        refusal(org, await self._hold(
            keys=[slots_key(org.id), usage_key(org.id, now)],
            args=[now, now + hold_seconds, job_id, org.concurrency, org.quota]))

    async def settle(self, org: Organisation, job_id: str, *, success: bool) -> bool:
        """Free the slot; charge one screenshot when successful. True when charged.

        When Redis cannot take it, its error is raised (the caller answers it: temporary_unavailable) and the slot
        is freed uncharged in the background as soon as Redis takes writes again (that answer was an error), so a
        failover never leaves the organisation a slot short until the slot expires."""
        try:
            return await self._settle_now(org.id, job_id, success=success)
        except redis.RedisError as error:
            log.warning("could not free the slot of job %s now (%s: %s); freeing it, uncharged, once Redis takes "
                        "writes again", job_id, type(error).__name__, error)
            task = asyncio.ensure_future(self._free_later(org.id, job_id))
            self._freeing.add(task)  # held until done: the loop keeps only a weak reference
            task.add_done_callback(self._freeing.discard)
            raise

    async def _settle_now(self, org_id: str, job_id: str, *, success: bool) -> bool:
        now = time.time()
        charged = await self._settle(keys=[slots_key(org_id), usage_key(org_id, now)],
                                     args=[job_id, int(success), USAGE_KEEP_SECONDS])
        return bool(charged)

    async def _free_later(self, org_id: str, job_id: str) -> None:
        """Free `job_id`'s slot uncharged, tried again with a growing pause until Redis takes it (SETTLE is
        idempotent: a slot already gone is left alone) or no slot could still be held."""
        pause, give_up = FREE_LATER_FIRST_SECONDS, time.monotonic() + FREE_LATER_FOR_SECONDS
        while time.monotonic() < give_up:
            await asyncio.sleep(pause)
            try:
                await self._settle_now(org_id, job_id, success=False)
            except redis.RedisError:
                pause = min(pause * 2, FREE_LATER_MOST_SECONDS)
                continue
            log.info("freed the slot of job %s, uncharged, after Redis came back", job_id)
            return

    async def usage(self, org: Organisation) -> Usage:
        """The usage record of GET /usage."""
        now = time.time()
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.get(usage_key(org.id, now))
            pipe.zrangebyscore(slots_key(org.id), now, "+inf", withscores=True)
            used_raw, slots = await pipe.execute()
        used = int(used_raw or 0)
        remaining = max(0, org.concurrency - len(slots))
        # When a slot is free now, "now"; else the earliest moment a held slot must free.
        next_free = now if remaining > 0 or not slots else min(score for _, score in slots)
        return Usage(total=org.quota, available=max(0, org.quota - used), used=used,
                     concurrency_limit=org.concurrency, concurrency_remaining=remaining,
                     concurrency_reset=int(next_free * 1_000_000_000))
