"""Redis refusing writes for real, on a service of the module's own: full (`maxmemory` reached under `noeviction`,
the policy docs/operating.md asks for) and read-only (made a replica of a primary that is not there). A capture
meanwhile answers 503 `temporary_unavailable` with Retry-After and charges nothing; once Redis takes writes again
the service recovers by itself, no process of it having ended, and the books are exact: one capture, one
charge."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx
import pytest
import redis

from tests.conftest import Org
from tests.support.servers import RunningService, free_port, redis_server, running_service, wait_for
from tests.support.site import Site

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    data = tmp_path_factory.mktemp("redis-faults")
    (data / "redis").mkdir()
    with redis_server(data / "redis") as url, running_service(url, data, workers=1) as running:
        yield running


@pytest.fixture
def own_org(own: RunningService, make_org_in) -> Org:  # type: ignore[no-untyped-def]
    return make_org_in(own.redis_url)  # type: ignore[no-any-return]


@contextlib.contextmanager
def full(connection: redis.Redis) -> Iterator[None]:
    """Redis past its maxmemory under noeviction: 8 MiB of ballast, then maxmemory set below what it uses (so
    that even the smallest write is refused, as when a busy Redis has just crossed it)."""
    connection.config_set("maxmemory-policy", "noeviction")
    for n in range(8):
        connection.set(f"ballast:{n}", b"x" * 1024 * 1024)
    used = int(connection.info("memory")["used_memory"])
    connection.config_set("maxmemory", str(used - 4 * 1024 * 1024))
    try:
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            connection.set("probe", "1")
        yield
    finally:
        connection.config_set("maxmemory", "0")
        connection.delete(*[f"ballast:{n}" for n in range(8)])


@contextlib.contextmanager
def read_only(connection: redis.Redis) -> Iterator[None]:
    """Redis a replica of a primary that does not answer: it refuses every write (READONLY)."""
    connection.replicaof("127.0.0.1", str(free_port()))
    try:
        with pytest.raises(redis.exceptions.ReadOnlyError):
            connection.set("probe", "1")
        yield
    finally:
        connection.replicaof("NO", "ONE")


def take(http: httpx.Client, org: Org, site: Site) -> httpx.Response:
    return http.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": site.url("/colours.html"),
                                                   "viewport_width": "200", "viewport_height": "100"})


@pytest.mark.parametrize("fault", [full, read_only], ids=["full", "read-only"])
def test_redis_refusing_writes_is_temporary_unavailable_uncharged_and_recovers_with_exact_books(
        own: RunningService, own_org: Org, site: Site, fault) -> None:  # type: ignore[no-untyped-def]
    connection = redis.Redis.from_url(own.redis_url)
    with httpx.Client(base_url=own.url, timeout=90) as http:
        def used() -> int:
            return int(http.get("/v1/screenshot/usage", params={"access_key": own_org.access_key}).json()["used"])

        assert take(http, own_org, site).status_code == 200
        before = used()
        with fault(connection):
            refused = take(http, own_org, site)
            assert refused.status_code == 503, refused.text
            assert refused.json()["error_code"] == "temporary_unavailable", refused.text
            assert int(refused.headers["retry-after"]) > 0
            assert used() == before
        wait_for(lambda: take(http, own_org, site).status_code == 200, 60, "a capture once Redis takes writes")
        assert used() == before + 1
    # No process ended on it (a worker once quit on the UNBLOCKED a blocking read gets when Redis turns replica).
    assert {role: process.poll() for role, process in own.processes.items()} == dict.fromkeys(own.processes)
