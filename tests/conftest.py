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
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis.asyncio as aioredis

from service.organisations import OrganisationStore
from service.settings import default_workers
from tests.support import shards
from tests.support.plain import PlainBrowser
from tests.support.servers import ROOT, RunningService, S3Server, free_port, redis_server, running_service, s3_server
from tests.support.site import Site
from tests.support.tls import authority

__all__ = ["ROOT", "Org", "RunningService", "free_port"]
# tests/image builds and runs the container image: `make image-test`, after `make test` (.ci/run runs both).
collect_ignore = [] if os.environ.get("SCREENSHOT_IMAGE_TEST") else ["image"]

LOCK_TEST = "test_the_lock_resolves_under_debian_s_python"
SHARD = os.environ.get("SCREENSHOT_TEST_SHARD", "")  # "1/2": this process runs the first of two shares (Makefile)
# The directory where the shares take their files at run time (tests/support/shards.py); the Makefile makes it.
CLAIMS = os.environ.get("SCREENSHOT_TEST_CLAIMS", "")
_took: dict[str, float] = {}  # seconds each file's tests took in this run (setup, call and teardown)
_claims: list[shards.Claims] = []  # this share's, once its tests are collected


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With SCREENSHOT_TEST_SHARD, the files this share may run: the anchored ones placed in it and every file the
    shares take at run time (pytest_runtestloop), in their order (tests/support/shards.py)."""
    if not SHARD:
        return
    try:
        share, shares = shards.parse(SHARD)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    if not CLAIMS or not os.path.isdir(CLAIMS):
        raise pytest.UsageError("SCREENSHOT_TEST_SHARD needs SCREENSHOT_TEST_CLAIMS, a directory every share sees "
                                "(made empty for each run): `make test` sets both")
    weighed = shards.weights((item.nodeid for item in items), shards.known())
    placed = shards.anchor(weighed, shares)

    def runs_here(item: pytest.Item) -> bool:
        unit = shards.unit_of(shards.file_of(item.nodeid))
        return unit in weighed and placed.get(unit, share) == share

    others = [item for item in items if not runs_here(item)]
    if others:
        config.hook.pytest_deselected(items=others)
    items[:] = shards.in_order([item for item in items if runs_here(item)], lambda item: item.nodeid, weighed)
    _claims.append(shards.Claims(Path(CLAIMS), weighed, shards.lead(weighed, placed, share, shares)))


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """A share runs the files it takes as it goes (shards.Claims.run); otherwise pytest's own loop. The next test
    is known before each runs, as pytest's loop knows it (a module's fixtures end when the next test is not
    in it)."""
    if not _claims or session.config.option.collectonly:
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        raise session.Interrupted(f"{session.testsfailed} error{'s' if session.testsfailed != 1 else ''} "
                                  "during collection")
    walk = _claims[0].run(session.items, lambda item: item.nodeid)
    item = next(walk, None)
    while item is not None:
        following = next(walk, None)
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=following)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
        item = following
    taken = _claims[0].taken
    session.config.get_terminal_writer().line(
        f"\nthis share took {len(taken)} of the files both shares take from (tests/support/shards.py); "
        "the other share ran the rest")
    return True


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = shards.file_of(report.nodeid)
    _took[path] = _took.get(path, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A share's run (the whole suite's files) writes what its files took, for `python -m tests.support.shards`."""
    if SHARD and _took:
        shards.MEASURED.mkdir(exist_ok=True)
        share = SHARD.replace("/", "-of-")
        (shards.MEASURED / f"test-durations-{share}.json").write_text(json.dumps(_took, indent=1) + "\n")
DEBIAN_PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="session", autouse=True)
def lock_resolution(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[subprocess.Popen[str] | None]:
    """tests/unit/test_lock.py's resolution (pip, mostly waiting on the package index) started with the session
    when that test is to run, so its 20 s overlap the others; the test joins it."""
    if not any(item.name == LOCK_TEST for item in request.session.items) or not os.path.exists(DEBIAN_PYTHON):
        yield None
        return
    venv = tmp_path_factory.mktemp("lock") / "venv"
    script = (f'{DEBIAN_PYTHON} -c "import sys; print(sys.version_info[:3])" >&2 && {DEBIAN_PYTHON} -m venv {venv} '
              f'&& {venv}/bin/pip install --dry-run --quiet --no-input -c requirements.lock -e ".[dev]"')
    process = subprocess.Popen(["bash", "-c", script], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


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
