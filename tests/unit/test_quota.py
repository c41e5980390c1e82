"""Quota and concurrency in Redis: atomic reservations, successes charged once, no leaks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
import redis
import redis.asyncio as aioredis

from service.errors import ConcurrencyLimitReached, ScreenshotsLimitReached
from service.organisations import Organisation
from service.quota import QuotaKeeper, Usage
from tests.support.servers import redis_server

T = TypeVar("T")


def run_with_keeper(redis_url: str, action: Callable[[QuotaKeeper], Awaitable[T]]) -> T:
    async def go() -> T:
        connection = aioredis.Redis.from_url(redis_url)
        try:
            return await action(QuotaKeeper(connection))
        finally:
            await connection.aclose()

    return asyncio.run(go())


def new_org(quota: int, concurrency: int) -> Organisation:
    return Organisation(id=f"t{time.monotonic_ns()}", name="t", quota=quota, concurrency=concurrency,
                        signing_key=None, require_signature=False)


def test_concurrent_reservations_never_exceed_the_limit(redis_url: str) -> None:
    org = new_org(quota=1000, concurrency=3)

    async def action(keeper: QuotaKeeper) -> list[bool]:
        async def one(i: int) -> bool:
            try:
                await keeper.hold(org, f"job{i}", 60)
                return True
            except ConcurrencyLimitReached:
                return False

        return list(await asyncio.gather(*(one(i) for i in range(20))))

    assert sum(run_with_keeper(redis_url, action)) == 3


def test_only_successes_are_charged_once(redis_url: str) -> None:
    org = new_org(quota=10, concurrency=5)

    async def action(keeper: QuotaKeeper) -> tuple[list[bool], int]:
        await keeper.hold(org, "ok", 60)
        await keeper.hold(org, "failed", 60)
        charged = [
            await keeper.settle(org, "ok", success=True),
            await keeper.settle(org, "ok", success=True),  # second settle of the same job: nothing
            await keeper.settle(org, "failed", success=False),
        ]
        return charged, (await keeper.usage(org)).used

    charged, used = run_with_keeper(redis_url, action)
    assert charged == [True, False, False]
    assert used == 1


def test_quota_counts_jobs_in_flight(redis_url: str) -> None:
    org = new_org(quota=2, concurrency=5)

    async def action(keeper: QuotaKeeper) -> None:
        await keeper.hold(org, "a", 60)
        await keeper.hold(org, "b", 60)
        with pytest.raises(ScreenshotsLimitReached):
            await keeper.hold(org, "c", 60)
        await keeper.settle(org, "a", success=False)  # a failure gives its reservation back
        await keeper.hold(org, "c", 60)

    run_with_keeper(redis_url, action)


def test_expired_slots_are_reclaimed(redis_url: str) -> None:
    org = new_org(quota=100, concurrency=1)

    async def action(keeper: QuotaKeeper) -> None:
        await keeper.hold(org, "crashed", 0.2)  # its holder never settles
        with pytest.raises(ConcurrencyLimitReached):
            await keeper.hold(org, "next", 60)
        await asyncio.sleep(0.3)
        await keeper.hold(org, "next", 60)

    run_with_keeper(redis_url, action)


def test_usage_record(redis_url: str) -> None:
    org = new_org(quota=50, concurrency=4)

    async def action(keeper: QuotaKeeper) -> dict[str, object]:
        await keeper.hold(org, "a", 30)
        await keeper.hold(org, "b", 60)
        await keeper.settle(org, "b", success=True)
        return (await keeper.usage(org)).to_json()

    before = time.time_ns()
    record = run_with_keeper(redis_url, action)
    assert record["total"] == 50 and record["used"] == 1 and record["available"] == 49
    concurrency = record["concurrency"]
    assert isinstance(concurrency, dict)
    assert concurrency["limit"] == 4 and concurrency["remaining"] == 3
    assert before <= concurrency["reset"] <= time.time_ns()  # a slot is free now


def test_a_slot_redis_would_not_free_is_freed_uncharged_once_it_takes_writes_again(tmp_path: Path) -> None:
    """A failover or refused writes as a request ends: the settlement's error is the caller's answer, and the slot
    does not stay held until it expires (tests/cluster/test_failover.py's books): freed, not charged, once Redis
    takes writes again."""
    org = new_org(quota=10, concurrency=2)
    with redis_server(tmp_path) as url:
        admin = redis.Redis.from_url(url)

        async def action(keeper: QuotaKeeper) -> Usage:
            await keeper.hold(org, "job", 600)
            admin.config_set("min-replicas-to-write", "1")  # it has no replica: every write is refused
            try:
                with pytest.raises(redis.ResponseError, match="NOREPLICAS"):
                    await keeper.settle(org, "job", success=True)
                await asyncio.sleep(1)  # tried again meanwhile, refused again
                assert (await keeper.usage(org)).concurrency_remaining == 1
            finally:
                admin.config_set("min-replicas-to-write", "0")
            for _ in range(200):  # tried again within FREE_LATER_MOST_SECONDS
                if (usage := await keeper.usage(org)).concurrency_remaining == 2:
                    return usage
                await asyncio.sleep(0.05)
            return await keeper.usage(org)

        usage = run_with_keeper(url, action)
    assert usage.concurrency_remaining == 2
    assert usage.used == 0  # the request was answered with the error: nothing charged
