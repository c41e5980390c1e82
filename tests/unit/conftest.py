"""Fixtures the unit tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis


@pytest.fixture
def connection(redis_url: str) -> Iterator[redis.Redis]:
    """A Redis database of the run's redis-server that no worker of the test service reads, empty before and
    after the test (the hand-off's tests: test_lanes.py, test_fair_lanes.py)."""
    client = redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + "/5")
    client.flushdb()
    yield client
    client.flushdb()
    client.close()
