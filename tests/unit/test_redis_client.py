"""How the roles reach Redis (render/queue/redis_client.py): Sentinel addresses, the settings that name them, and
no password in what gets printed."""

from __future__ import annotations

import pytest
import redis.connection
import redis.exceptions

from render.queue.redis_client import RedisTarget, away, parse_sentinels
from service.settings import ServiceSettings, SettingsError, load_settings


@pytest.mark.parametrize(("value", "expected"), [
    ("10.0.0.1:26379", (("10.0.0.1", 26379),)),
    ("a:1, b:2,c", (("a", 1), ("b", 2), ("c", 26379))),
    ("[::1]:26380", (("::1", 26380),)),
], ids=["one", "several-and-default-port", "ipv6"])
def test_sentinel_addresses_parse(value: str, expected: tuple[tuple[str, int], ...]) -> None:
    assert parse_sentinels(value) == expected


@pytest.mark.parametrize("value", ["", " , ", "host:port", "host:70000", ":26379"],
                         ids=["empty", "commas", "word-port", "port-range", "no-host"])
def test_bad_sentinel_addresses_are_refused(value: str) -> None:
    with pytest.raises(ValueError):
        parse_sentinels(value)


def test_a_target_never_shows_its_password() -> None:
    target = RedisTarget("rediss://app:s3cret-pass@redis.internal:6380/2?ssl_ca_certs=/ca.pem",
                         (("s1", 26379),), "screens", "sentinel-s3cret")
    shown = repr(target)
    assert "s3cret" not in shown and "redis.internal:6380/2" in shown and "screens" in shown


def test_sentinel_settings_need_a_url_and_name_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SCREENSHOT_REDIS_URL", "SCREENSHOT_REDIS_SENTINEL_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SCREENSHOT_REDIS_SENTINELS", "s1:26379,s2:26379")
    with pytest.raises(SettingsError, match="SCREENSHOT_REDIS_SENTINELS needs SCREENSHOT_REDIS_URL"):
        load_settings()
    monkeypatch.setenv("SCREENSHOT_REDIS_SENTINELS", "s1:port")
    with pytest.raises(SettingsError, match="SCREENSHOT_REDIS_SENTINELS"):
        load_settings()
    monkeypatch.setenv("SCREENSHOT_REDIS_SENTINELS", "s1:26379,s2")
    monkeypatch.setenv("SCREENSHOT_REDIS_URL", "redis://:pw@screens/0")
    monkeypatch.setenv("SCREENSHOT_REDIS_MASTER_NAME", "screens")
    target = ServiceSettings().redis()
    assert target.sentinels == (("s1", 26379), ("s2", 26379)) and target.master_name == "screens"


def test_a_sentinel_client_talks_to_the_primary_with_the_url_s_credentials() -> None:
    client = RedisTarget("rediss://app:pw@screens/3?ssl_ca_certs=/ca.pem", (("s1", 26379),), "screens").sync()
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["username"], kwargs["password"], kwargs["db"], kwargs["ssl_ca_certs"]) == ("app", "pw", 3,
                                                                                              "/ca.pem")
    assert issubclass(client.connection_pool.connection_class, redis.connection.SSLConnection)
    assert "host" not in kwargs


def test_the_retry_window_is_the_setting_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCREENSHOT_REDIS_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setenv("SCREENSHOT_REDIS_RETRY_SECONDS", "2.5")
    monkeypatch.delenv("SCREENSHOT_REDIS_SENTINELS", raising=False)
    target = ServiceSettings().redis()
    assert target.retry_seconds == 2.5
    assert target.sync().connection_pool.connection_kwargs["retry"].seconds == 2.5
    assert target.asyncio().connection_pool.connection_kwargs["retry"].seconds == 2.5


@pytest.mark.parametrize(("error", "for_now"), [
    (redis.ConnectionError("Connection refused"), True),
    (redis.TimeoutError("Timeout reading from socket"), True),
    (redis.ResponseError("NOREPLICAS Not enough good replicas to write."), True),
    (redis.ResponseError("NOREPLICAS Not enough good replicas to write. script: 0528c7, on @user_script:2."), True),
    (redis.ResponseError("Command # 1 (SET alive:w 1 EX 3) of pipeline caused error: NOREPLICAS Not enough good "
                         "replicas to write."), True),
    (redis.ReadOnlyError("You can't write against a read only replica."), True),
    (redis.exceptions.MasterDownError("Link with MASTER is down and replica-serve-stale-data is set to 'no'."), True),
    (redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory"), True),
    (redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"), False),
    (redis.ResponseError("ERR Error running script: attempt to compare nil with number"), False),
    (redis.AuthenticationError("invalid password"), True),  # a ConnectionError: a worker waits for the right one
])
def test_away_tells_a_redis_that_cannot_serve_now_from_a_command_it_never_takes(error: redis.RedisError,
                                                                               for_now: bool) -> None:
    assert away(error) is for_now
