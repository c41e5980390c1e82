"""Quota and concurrency in Redis: atomic reservations, successes charged once, no leaks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
import redis.asyncio as aioredis

from service.errors import ConcurrencyLimitReached, ScreenshotsLimitReached
from service.organisations import Organisation
from service.quota import QuotaKeeper

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
