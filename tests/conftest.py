"""Fixtures that start real servers on free ports and always stop them.

- `redis_url`: a redis-server of the session's own.
- `site`: the local test site (tests/support/site.py); `tls_site`: the same over HTTPS (tests/support/tls.py).
- `service`: the API and the default number of render workers as real processes, as `run` starts them.
- `org`: a fresh organisation (keys, quota, concurrency) for one test.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis.asyncio as aioredis
from xdist.scheduler import LoadFileScheduling
from xdist.workermanage import WorkerController

from service.organisations import OrganisationStore
from service.settings import default_workers
from tests.support import background, scheduling
from tests.support.plain import PlainBrowser
from tests.support.servers import ROOT, RunningService, S3Server, free_port, redis_server, running_service, s3_server
from tests.support.site import Site
from tests.support.tls import authority

__all__ = ["ROOT", "Org", "RunningService", "free_port"]
# tests/image builds and runs the container image: `make image-test`, after `make test` (.ci/run runs both).
collect_ignore = [] if os.environ.get("SCREENSHOT_IMAGE_TEST") else ["image"]

# Set by `make test`: where the run writes what each file's tests took (tests/support/scheduling.py).
DURATIONS = os.environ.get("SCREENSHOT_TEST_DURATIONS", "")
PIECES = pytest.StashKey[background.Pieces]()
_took: dict[str, float] = {}  # seconds each file's tests took in this run (setup, call and teardown)


def _worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(trylast=True)  # after pytest's tmp_path plugin
def pytest_configure(config: pytest.Config) -> None:
    """The process that hands out the tests (pytest-xdist's controller, or pytest alone) keeps the work started
    with the run (tests/support/background.py) under its base temporary directory."""
    if not _worker(config):
        # xdist's controller makes its workers' directories under it the same way (popen-gw0, ...).
        base = config._tmp_path_factory.mktemp("background", numbered=False)  # type: ignore[attr-defined]
        config.stash[PIECES] = background.Pieces(base)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: WorkerController) -> None:
    node.workerinput["background"] = str(node.config.stash[PIECES].base)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: WorkerController, ids: list[str]) -> None:
    node.config.stash[PIECES].start(ids)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadFileScheduling | None:
    """`--dist loadfile` with tests/e2e as one unit (scheduling.WHOLE)."""
    return WholeUnits(config, log) if config.getoption("dist") == "loadfile" else None  # type: ignore[arg-type]


class WholeUnits(LoadFileScheduling):
    def _split_scope(self, nodeid: str) -> str:
        return scheduling.unit_of(scheduling.file_of(nodeid))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files the longest first, those that join background work late (tests/support/scheduling.py): the
    order pytest-xdist hands them out in (`--no-loadscope-reorder`), the same in every worker."""
    weighed = scheduling.weights((item.nodeid for item in items), scheduling.known())
    items[:] = scheduling.in_order(items, lambda item: item.nodeid, weighed)


def pytest_collection_finish(session: pytest.Session) -> None:
    """pytest alone (no xdist) starts the background work its tests join here."""
    if not _worker(session.config) and not session.config.option.collectonly:
        session.config.stash[PIECES].start(item.nodeid for item in session.items)


def background_of(request: pytest.FixtureRequest, test: str) -> background.Outcome:
    """What came of the background work `test` joins, in whichever process runs it."""
    config = request.config
    base = Path(config.workerinput["background"]) if _worker(config) else config.stash[PIECES].base  # type: ignore[attr-defined]
    return background.outcome(base, test)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = scheduling.file_of(report.nodeid)
    _took[path] = _took.get(path, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stops the background work; with SCREENSHOT_TEST_DURATIONS, writes what each file took."""
    if _worker(session.config):
        return
    session.config.stash[PIECES].stop()
    if DURATIONS and _took:
        Path(DURATIONS).parent.mkdir(parents=True, exist_ok=True)
        Path(DURATIONS).write_text(json.dumps(_took, indent=1) + "\n")


@pytest.fixture
def lock_resolution(request: pytest.FixtureRequest) -> background.Outcome:
    """tests/unit/test_lock.py's resolution, started with the run (tests/support/background.py)."""
    return background_of(request, background.LOCK_TEST)


@pytest.fixture(scope="module")
def plain() -> Iterator[PlainBrowser]:
    """A plain Playwright script's browser on the same Chromium (tests/support/plain.py), the reference of the
    fidelity checks; one per module, closed after it."""
    browser = PlainBrowser()
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(scope="session")
def site() -> Iterator[Site]:
    with Site() as running:
        yield running


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """An S3-compatible server (moto) over HTTP on loopback."""
    with s3_server() as running:
        yield running


@pytest.fixture(scope="session")
def tls_site() -> Iterator[Site]:
    """The test site over HTTPS, with a certificate from the run's CA for the test host names."""
    with Site(tls=authority().server_context()) as running:
        yield running


@pytest.fixture(scope="session")
def service(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    with running_service(redis_url, tmp_path_factory.mktemp("service"), workers=default_workers(),
                         SCREENSHOT_MAX_BODY_BYTES="65536", SCREENSHOT_MONITOR_MIN_INTERVAL="1") as running:
        yield running


@dataclass
class Org:
    id: str
    access_key: str
    signing_key: str


async def create_org(redis_url: str, **kwargs: object) -> Org:
    connection = aioredis.Redis.from_url(redis_url)
    try:
        created = await OrganisationStore(connection).create("test", **kwargs)  # type: ignore[arg-type]
    finally:
        await connection.aclose()
    return Org(created.organisation.id, created.access_key, created.organisation.signing_key or "")


@pytest.fixture
def make_org_in():  # type: ignore[no-untyped-def]
    """Factory: `make_org_in(redis_url, quota=5, ...)` for a service on another Redis database."""

    def make(url: str, quota: int = 1000, concurrency: int = 10, require_signature: bool = False) -> Org:
        return asyncio.run(create_org(url, quota=quota, concurrency=concurrency,
                                       require_signature=require_signature))

    return make


@pytest.fixture
def make_org(redis_url: str, make_org_in):  # type: ignore[no-untyped-def]
    """Factory: `make_org(quota=5, concurrency=1, require_signature=True)`."""
    return lambda **kwargs: make_org_in(redis_url, **kwargs)


@pytest.fixture
def org(make_org) -> Org:  # type: ignore[no-untyped-def]
    return make_org()


@pytest.fixture
def isolated_org(isolated: RunningService, make_org_in) -> Org:  # type: ignore[no-untyped-def]
    """An organisation in the module's own `isolated` service (its own Redis database)."""
    return make_org_in(isolated.redis_url)  # type: ignore[no-any-return]


@pytest.fixture
def isolated_http(isolated: RunningService) -> Iterator[httpx.Client]:
    """An HTTP client of the module's own `isolated` service."""
    with httpx.Client(base_url=isolated.url, timeout=60) as http:
        yield http


@pytest.fixture
def client(service: RunningService) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=120) as http:
        yield http
