"""The result cache: a hit renders nothing, charges nothing, holds no slot.

Key: SHA-256 over the validated parameters that shape the output (not credentials, caching, response
type, async or webhook fields) plus the organisation and `cache_key`. The object lives in storage under
`cache/`; a Redis record with the entry's TTL says it is live, so an expired entry is never served
(bucket lifecycle rules on `cache/` reclaim the objects). Identical requests arriving together render
once: the first takes a lock, the others wait for its record.

Stale-while-revalidate (`cache_stale_ttl`): for that many seconds past its TTL an entry is still served, at
once, marked stale; the first request to see it stale refreshes it in the background (the same lock, taken
without waiting, so one refresh runs however many requests see it), and the refreshed entry replaces it. An entry
has two object slots and a refresh writes the one its stale entry does not use: the object a live record points
to is never rewritten (a stale answer is the old picture, byte for byte, and a cache URL handed out keeps its
bytes until the refresh after next), and an entry never holds more than two objects.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import orjson
import redis.asyncio as aioredis

from render.contract.options import TakeOptions
from render.contract.wire import JobResult
from render.queue.keys import cache_lock_key, cache_record_key
from render.queue.scripts import RELEASE_LOCK

DEFAULT_TTL = 14400
# Parameters that do not change what is rendered, and the vision key (a secret; the
# completion depends on the prompt, which stays in the key).
NOT_IN_KEY = frozenset({"access_key", "signature", "cache", "cache_ttl", "response_type", "async", "webhook_url",
                        "webhook_sign", "webhook_errors", "external_identifier", "vision_provider_api_key",
                        "attachment_name", "cache_stale_ttl"})
POLL_SECONDS = 0.05


def cache_key(organisation: str, options: TakeOptions) -> str:
    """The entry's hex digest for these options."""
    params = {name: value for name, value in options.model_dump(mode="json", by_alias=True, exclude_unset=True)
              .items() if name not in NOT_IN_KEY}
    material = orjson.dumps({"organisation": organisation, "route": options.job_kind, "params": params,
                             "cache_key": options.cache_key},
                            option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(material).hexdigest()


def object_key(organisation: str, digest: str, options: TakeOptions, replacing: str | None = None) -> str:
    """The object of an entry; for a refresh (`replacing` the stale entry's object) the slot it does not use."""
    first = f"cache/{organisation}/{digest}.{options.file_extension}"
    return f"cache/{organisation}/{digest}-b.{options.file_extension}" if replacing == first else first


class Cache:
    """Entries (JobResult metadata, no bytes) in Redis with the entry's TTL."""

    def __init__(self, connection: aioredis.Redis) -> None:
        self._redis = connection
        self._refreshing: set[asyncio.Task[None]] = set()  # background refreshes, kept until they end

    def refresh_soon(self, refresh: Coroutine[Any, Any, None]) -> None:
        """Run a stale entry's refresh in the background (the answer does not wait for it)."""
        task = asyncio.create_task(refresh)
        self._refreshing.add(task)
        task.add_done_callback(self._refreshing.discard)

    async def get(self, digest: str) -> tuple[JobResult, str, bool] | None:
        """A live entry: the stored result, the reference of the render that made it, and whether it is past its
        TTL (served only within its `cache_stale_ttl`)."""
        raw = await self._redis.get(cache_record_key(digest))
        if raw is None:
            return None
        record = orjson.loads(raw)
        now = time.time()
        if record["expires"] + record.get("stale_for", 0) <= now:
            return None
        return JobResult.from_meta(record["result"]), record["reference"], record["expires"] <= now

    async def put(self, digest: str, result: JobResult, reference: str, ttl: int, stale_ttl: int = 0) -> None:
        now = time.time()
        record = {"result": result.meta(), "reference": reference, "expires": now + ttl, "stale_for": stale_ttl}
        await self._redis.set(cache_record_key(digest), orjson.dumps(record), ex=ttl + stale_ttl)

    async def take_refresh(self, digest: str, reference: str, seconds: float) -> bool:
        """The lock of `digest` for a background refresh, without waiting: False when a render holds it."""
        return bool(await self._redis.set(cache_lock_key(digest), reference, nx=True, ex=max(1, int(seconds))))

    async def end_refresh(self, digest: str, reference: str) -> None:
        await RELEASE_LOCK.on(self._redis)(keys=[cache_lock_key(digest)], args=[reference])

    @asynccontextmanager
    async def single_flight(self, digest: str, reference: str, wait_seconds: float) -> AsyncIterator[bool]:
        """True: this request renders (it holds the lock). False: another one rendered it meanwhile (or
        gave up), and the caller should look again before rendering itself."""
        lock = cache_lock_key(digest)
        if await self._redis.set(lock, reference, nx=True, ex=max(1, int(wait_seconds))):
            try:
                yield True
            finally:
                await self._redis.delete(lock)
            return
        give_up = time.monotonic() + wait_seconds
        while time.monotonic() < give_up:
            await asyncio.sleep(POLL_SECONDS)
            if not await self._redis.exists(lock):
                break
        yield False
