"""How every role reaches Redis: one server by URL (`redis://`, `rediss://` with TLS, `unix://`), or the
primary that Redis Sentinel names, rediscovered after a failover.

Every client, the API's, the workers', the webhook deliverer's, the health probe's and the command line's,
comes from `RedisTarget`, so a deployment's user, password, TLS options and Sentinel addresses are given
once. Each client retries a lost connection for `retry_seconds` (SCREENSHOT_REDIS_RETRY_SECONDS; backing
off to half a second between attempts) before the caller sees the error: long enough for Sentinel to
promote a replica (2.3-2.4 s with `down-after-milliseconds 1000` in tests/cluster/test_failover.py, about
4-5 s with deploy/'s 3000), short enough that a request fails while its client still waits when Redis is
really gone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis
import redis.asyncio as aioredis
import redis.asyncio.connection
import redis.asyncio.retry
import redis.asyncio.sentinel
import redis.connection
import redis.retry
import redis.sentinel
from redis.backoff import ExponentialBackoff

RETRY_SECONDS = 12.0
RETRY_BASE_SECONDS = 0.05
RETRY_CAP_SECONDS = 0.5
CONNECT_TIMEOUT_SECONDS = 5.0
SENTINEL_TIMEOUT_SECONDS = 2.0
T = TypeVar("T")
RETRIED = (redis.ConnectionError, redis.TimeoutError, ConnectionError, TimeoutError)
# What a primary answers while it cannot take a write for now, nothing of the command done: too few good
# replicas (`min-replicas-to-write`, replicas past `min-replicas-max-lag` on a busy machine), a demoted primary,
# a primary still electing (MASTERDOWN is redis-py's ClusterDownError subclass), a retry asked for, a Redis at
# its maxmemory under noeviction (OOM), and a blocking read broken off as the server turned replica (UNBLOCKED).
REFUSED_FOR_NOW = ("NOREPLICAS", "READONLY", "MASTERDOWN", "TRYAGAIN", "OOM", "UNBLOCKED")
# The connection options of a URL that say where the server is: with Sentinel, the sentinels say that.
_PLACE = ("host", "port", "path", "unix_socket_path", "connection_class")


class _Retry(redis.retry.Retry):
    """Retry what failed, backing off, until `seconds` have passed since the first failure (redis-py
    counts attempts, and an attempt against a vanished host may itself take the connect timeout)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(ExponentialBackoff(cap=RETRY_CAP_SECONDS, base=RETRY_BASE_SECONDS), -1, RETRIED)
        self.seconds = seconds

    def call_with_retry(self, do: Callable[[], T], fail: Callable[..., Any],
                        is_retryable: Callable[[Exception], bool] | None = None,
                        with_failure_count: bool = False) -> T:
        failures, give_up = 0, 0.0
        while True:
            try:
                return do()
            except RETRIED as error:
                if isinstance(error, redis.AuthenticationError) or (is_retryable and not is_retryable(error)):
                    raise  # a wrong password stays wrong
                failures += 1
                fail(error, failures) if with_failure_count else fail(error)
                give_up = give_up or time.monotonic() + self.seconds
                if time.monotonic() >= give_up:
                    raise
                time.sleep(self._backoff.compute(failures))


class _AsyncRetry(redis.asyncio.retry.Retry):
    """`_Retry` for the asyncio clients."""

    def __init__(self, seconds: float) -> None:
        super().__init__(ExponentialBackoff(cap=RETRY_CAP_SECONDS, base=RETRY_BASE_SECONDS), -1,
                         RETRIED)  # type: ignore[arg-type]
        self.seconds = seconds

    async def call_with_retry(self, do: Callable[[], Awaitable[T]], fail: Callable[..., Any],
                              is_retryable: Callable[[Exception], bool] | None = None,
                              with_failure_count: bool = False) -> T:
        failures, give_up = 0, 0.0
        while True:
            try:
                return await do()
            except RETRIED as error:
                if isinstance(error, redis.AuthenticationError) or (is_retryable and not is_retryable(error)):
                    raise  # a wrong password stays wrong
                failures += 1
                await (fail(error, failures) if with_failure_count else fail(error))
                give_up = give_up or time.monotonic() + self.seconds
                if time.monotonic() >= give_up:
                    raise
                await asyncio.sleep(self._backoff.compute(failures))


class _SentinelConnection(redis.sentinel.SentinelManagedConnection):
    """redis-py's connection to the primary Sentinel names, but dropped when a read is interrupted, as every
    other redis-py connection is. redis-py 8.1's leaves it open (`disconnect_on_error=False`), so the reply
    it was waiting for reaches the next command: a worker stopped in its blocking pop failed its last
    transaction with "Wrong number of response items", and a timed-out read would hand its late reply to
    whatever ran next."""

    def read_response(self, disable_decoding: bool = False, *, disconnect_on_error: bool = True,  # type: ignore[override]
                      **options: Any) -> Any:
        return super().read_response(disable_decoding=disable_decoding, disconnect_on_error=disconnect_on_error,
                                     **options)


class _SentinelTlsConnection(_SentinelConnection, redis.connection.SSLConnection):
    """`_SentinelConnection` over TLS."""


def text(value: bytes | str) -> str:
    """A Redis reply as text (clients here return bytes)."""
    return value.decode() if isinstance(value, bytes) else value


def parse_sentinels(value: str) -> tuple[tuple[str, int], ...]:
    """`host:port,host:port` (port 26379 when left out); ValueError naming what is wrong."""
    found = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        if item.startswith("["):  # [IPv6]:port
            host, _, rest = item[1:].partition("]")
            port = rest.removeprefix(":")
        elif item.count(":") == 1:
            host, port = item.split(":")
        else:  # a host alone (an IPv6 address without brackets too)
            host, port = item, ""
        if not host:
            raise ValueError(f"{item!r}: expected host:port")
        try:
            number = int(port) if port else 26379
        except ValueError:
            raise ValueError(f"{item!r}: the port is not a number") from None
        if not 0 < number < 65536:
            raise ValueError(f"{item!r}: the port is out of range")
        found.append((host, number))
    if not found:
        raise ValueError("expected host:port[,host:port...]")
    return tuple(found)


@dataclass(frozen=True)
class RedisTarget:
    """Where Redis is and how to talk to it. With `sentinels`, `url` gives only the database, user,
    password and TLS options (its host is not used) and the primary is the one the sentinels name
    `master_name`."""

    url: str
    sentinels: tuple[tuple[str, int], ...] = ()
    master_name: str = "mymaster"
    sentinel_password: str | None = field(default=None, repr=False)
    retry_seconds: float = RETRY_SECONDS

    def __repr__(self) -> str:  # never the password in the URL
        shown = urlsplit(self.url)
        where = f"{shown.scheme}://{shown.hostname or ''}{f':{shown.port}' if shown.port else ''}{shown.path}"
        return f"RedisTarget({where!r}, sentinels={self.sentinels!r}, master_name={self.master_name!r})"

    def _options(self, extra: dict[str, Any], retry: Any) -> dict[str, Any]:
        options = {"socket_connect_timeout": CONNECT_TIMEOUT_SECONDS, "retry": retry}
        if not self.url.startswith("unix:"):
            options["socket_keepalive"] = True  # a peer whose host vanished is noticed by the kernel too
        return {**options, **extra}

    def _sentinel_options(self, server: dict[str, Any]) -> dict[str, Any]:
        """Sentinels: the same TLS options, their own password, short timeouts (each is asked in turn)."""
        return {**{name: value for name, value in server.items() if name.startswith("ssl")},
                "password": self.sentinel_password, "socket_timeout": SENTINEL_TIMEOUT_SECONDS,
                "socket_connect_timeout": SENTINEL_TIMEOUT_SECONDS}

    def _server(self, parsed: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
        """The URL's database, user, password and TLS options for the primary Sentinel names."""
        tls = "SSL" in getattr(parsed.get("connection_class"), "__name__", "")
        server = {name: value for name, value in parsed.items() if name not in _PLACE}
        return {**server, **options, "ssl": tls}

    def sync(self, **extra: Any) -> redis.Redis:
        """A blocking client; `extra`: redis-py connection options (socket_timeout, ...)."""
        options = self._options(extra, _Retry(self.retry_seconds))
        if not self.sentinels:
            return redis.Redis(connection_pool=redis.ConnectionPool.from_url(self.url, **options))
        server = self._server(redis.connection.parse_url(self.url), options)
        server["connection_class"] = _SentinelTlsConnection if server.pop("ssl") else _SentinelConnection
        sentinel = redis.sentinel.Sentinel(self.sentinels, sentinel_kwargs=self._sentinel_options(server))
        return sentinel.master_for(self.master_name, **server)

    def asyncio(self, **extra: Any) -> aioredis.Redis:
        """An asyncio client; `extra` as for `sync`."""
        options = self._options(extra, _AsyncRetry(self.retry_seconds))
        if not self.sentinels:
            return aioredis.Redis(connection_pool=aioredis.ConnectionPool.from_url(self.url, **options))
        server = self._server(dict(redis.asyncio.connection.parse_url(self.url)), options)
        sentinel = redis.asyncio.sentinel.Sentinel(self.sentinels, sentinel_kwargs=self._sentinel_options(server))
        return sentinel.master_for(self.master_name, **server)


async def aclose(client: aioredis.Redis) -> None:
    """Close an asyncio client from `RedisTarget.asyncio`, and its connections to the sentinels, if any."""
    await client.aclose()
    manager = getattr(client.connection_pool, "sentinel_manager", None)
    for sentinel in getattr(manager, "sentinels", []):
        await sentinel.aclose()


def away(error: BaseException) -> bool:
    """Whether `error` says Redis cannot serve this now but will (lost, loading, or refusing writes for now),
    rather than that it will never take the command."""
    if isinstance(error, (*RETRIED, redis.ReadOnlyError, redis.exceptions.ClusterDownError,
                          redis.exceptions.TryAgainError)):
        return True
    message = str(error)  # a pipeline's error reads "Command # 1 (...) of pipeline caused error: NOREPLICAS ..."
    return isinstance(error, redis.ResponseError) and any(
        message.startswith(code) or f"caused error: {code}" in message for code in REFUSED_FOR_NOW)


def close(client: redis.Redis) -> None:
    """Close a blocking client from `RedisTarget.sync`, and its connections to the sentinels, if any."""
    client.close()
    manager = getattr(client.connection_pool, "sentinel_manager", None)
    for sentinel in getattr(manager, "sentinels", []):
        sentinel.close()


REPLICA_WAIT_MS = 1000  # how long a write that must survive a failover waits for a replica's acknowledgement


def replicas_have(client: redis.Redis) -> None:
    """With Sentinel (replicas behind the primary), wait until a replica holds what this client wrote so far:
    a job accepted just before the primary dies must be on the replica promoted in its place. Without Sentinel,
    nothing to wait for. A replica that does not answer in time costs REPLICA_WAIT_MS, no error."""
    if getattr(client.connection_pool, "sentinel_manager", None) is not None:
        client.wait(1, REPLICA_WAIT_MS)


async def replicas_have_async(client: aioredis.Redis) -> None:
    """`replicas_have` for the asyncio clients."""
    if getattr(client.connection_pool, "sentinel_manager", None) is not None:
        await client.wait(1, REPLICA_WAIT_MS)
