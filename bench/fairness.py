"""The fairness scenario: a quiet organisation's captures alone, and behind another organisation's
backlog of async captures kept at ten times what the fleet renders at once, in alternating rounds; its p50
behind the backlog over its p50 alone is the ratio reported (goal: at most 1.2x). Run by `bench.run` on the
service it measures; alone, on a service of its own: `.venv/bin/python -m bench.fairness [--shots 30]`."""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import time
from typing import Any

import httpx
import redis
import redis.asyncio as aioredis

from render.queue.keys import LANE_KEY
from service.organisations import OrganisationStore

BACKLOG_PER_WORKER = 10


async def _new_org(redis_url: str, name: str) -> tuple[str, str]:
    connection = aioredis.Redis.from_url(redis_url)
    try:
        created = await OrganisationStore(connection).create(name, quota=10**9, concurrency=10_000)
        return created.organisation.id, created.access_key
    finally:
        await connection.aclose()


def _keep_topped_up(api: str, redis_url: str, key: str, org: str, url: str, size: int,
                    stop: Any, sent: Any) -> None:
    """The noisy organisation's client, in a process of its own: async captures of `url`, topped up to `size`
    waiting, until `stop` is set."""
    connection = redis.Redis.from_url(redis_url)
    with httpx.Client(base_url=api, timeout=60) as http:
        while not stop.is_set():
            for _ in range(size - _waiting(connection, org)):
                http.get("/v1/screenshot/take", params={"access_key": key, "url": url, "async": "true"}
                         ).raise_for_status()
                with sent.get_lock():
                    sent.value += 1
            stop.wait(0.02)
    connection.close()


def _waiting(connection: redis.Redis, org: str) -> int:
    return int(connection.hget(f"{LANE_KEY}:waiting", org) or 0)


class Backlog:
    """The noisy organisation: async captures of `path`, topped up to `size` waiting, until stopped. Its client
    runs in a process of its own, as another customer's would: in the measuring process, its thread would
    share the interpreter (and its lock) with the quiet organisation's client and slow what is measured."""

    def __init__(self, base: str, api: str, redis_url: str, path: str, size: int) -> None:
        self.org, key = asyncio.run(_new_org(redis_url, "noisy"))
        self.size = size
        self.redis = redis.Redis.from_url(redis_url)
        context = multiprocessing.get_context("spawn")
        self.stop, self._sent = context.Event(), context.Value("i", 0)
        self._process = context.Process(target=_keep_topped_up, daemon=True, args=(
            api, redis_url, key, self.org, base + path, size, self.stop, self._sent))

    @property
    def sent(self) -> int:
        return int(self._sent.value)

    def waiting(self) -> int:
        return _waiting(self.redis, self.org)

    def __enter__(self) -> Backlog:
        self._process.start()
        deadline = time.monotonic() + 30
        while self.waiting() < self.size and time.monotonic() < deadline:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._process.join(30)
        deadline = time.monotonic() + 120
        while self.waiting() and time.monotonic() < deadline:  # drained before the next scenario
            time.sleep(0.1)
        self.redis.close()


def _shot(service: Any) -> dict[str, float]:
    """One capture of the simple page by the quiet organisation: seconds end to end, and its Server-Timing stages
    (milliseconds: queue, context, navigation, ...)."""
    started = time.perf_counter()
    answer = service.http.get("/v1/screenshot/take", params={
        "access_key": service.key, "url": service.base + "/bench/simple.html", "format": "png"})
    answer.raise_for_status()
    stages = {"seconds": time.perf_counter() - started}
    for item in answer.headers.get("server-timing", "").split(","):
        name, *params = item.strip().split(";")
        for param in params:
            if param.startswith("dur="):
                stages[name] = float(param[4:])
    # The time outside the worker's stages: HTTP, the API, Redis, the hand-off back.
    stages["outside"] = stages["seconds"] * 1000 - sum(value for name, value in stages.items() if name != "seconds")
    return stages


def _medians(shots: list[dict[str, float]]) -> dict[str, float]:
    return {name: statistics.median(shot.get(name, 0.0) for shot in shots) for name in shots[0]}


def fairness(service: Any, redis_url: str, shots: int, rounds: int = 3) -> dict[str, Any]:
    """The quiet organisation's p50 (the service's own key, the simple page) alone and behind the backlog, with
    the medians of its stages: `rounds` rounds of each, alternating (about `shots` shots of each kind in all), so
    that a slow spell of the machine falls on both sides rather than on one."""
    alone: list[dict[str, float]] = []
    behind: list[dict[str, float]] = []
    sent = depth = 0
    for _ in range(rounds):
        alone += [_shot(service) for _ in range(max(1, shots // rounds))]
        with Backlog(service.base, str(service.http.base_url), redis_url, "/bench/simple.html",
                     BACKLOG_PER_WORKER * service.fleet) as backlog:
            behind += [_shot(service) for _ in range(max(1, shots // rounds))]
            depth = backlog.waiting()
        sent += backlog.sent
    return {"alone_p50": statistics.median(shot["seconds"] for shot in alone),
            "behind_p50": statistics.median(shot["seconds"] for shot in behind),
            "alone_stages_ms": _medians(alone), "behind_stages_ms": _medians(behind),
            "backlog_at_end": depth, "backlog_jobs_sent": sent}


def main() -> None:
    import argparse

    from bench.pages import SITE_ADDRESS, serve_bench_pages
    from bench.sides import Service
    from render.settings import RenderSettings
    from service.settings import default_workers
    from tests.support.site import Site

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shots", type=int, default=30)
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--slots", type=int, default=RenderSettings().worker_slots, help="job slots a worker")
    args = parser.parse_args()
    serve_bench_pages()
    chromium = RenderSettings().chromium_path
    with Site(host=SITE_ADDRESS) as site, Service(site.base, args.workers, chromium, args.slots) as service:
        for _ in range(3):
            service.shot()
        found = fairness(service, service.redis_url, args.shots)
    print(f"alone p50 {found['alone_p50'] * 1000:.0f} ms, behind p50 {found['behind_p50'] * 1000:.0f} ms: "
          f"{found['behind_p50'] / found['alone_p50']:.2f}x (backlog {found['backlog_at_end']:.0f} at the end, "
          f"{found['backlog_jobs_sent']:.0f} sent)")
    for when in ("alone", "behind"):
        stages = {name: round(value, 1) for name, value in found[f"{when}_stages_ms"].items() if name != "seconds"}
        print(f"  {when}: {stages}")


if __name__ == "__main__":
    main()
