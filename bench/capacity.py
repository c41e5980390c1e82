"""Figures for the capacity model (docs/capacity.md), measured on this machine.

1. Per capture, by scenario, with the real service (one API, one worker, Redis, local storage): the
   worker's CPU (its Python, Playwright's driver and Chromium, every process of its tree), the API's and
   Redis's CPU, Redis commands and bytes in and out, and the stored bytes.
2. The queue path alone: the API and Redis with fake workers that answer at once (no browser), under a
   load of concurrent clients: captures a second it sustains, and CPU, Redis commands and bytes per
   capture, so where one Redis primary saturates can be computed.

    .venv/bin/python -m bench.capacity                 # both (about 3 minutes)
    .venv/bin/python -m bench.capacity --part queue    # only the queue path
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import redis

from render.contract.wire import JobRequest, JobResult
from render.queue import lanes
from render.queue.keys import LANE_KEY, WORKERS_SEEN_KEY, alive_key, result_key
from render.queue.records import ALIVE_TTL_SECONDS, record_job
from service.organisations import OrganisationStore
from tests.support.servers import (  # noqa: E501
    cpu_seconds,
    free_port,
    process_tree,
    redis_server,
    running_service,
    service_env,
    start,
    stop,
    wait_for,
)
from tests.support.site import Site

ROOT = Path(__file__).resolve().parent.parent

def redis_pid(url: str) -> int:
    return int(redis.Redis.from_url(url).info("server")["process_id"])


@dataclass
class Counters:
    commands: int
    bytes_in: int
    bytes_out: int

    @classmethod
    def read(cls, url: str) -> Counters:
        stats = redis.Redis.from_url(url).info("stats")
        return cls(int(stats["total_commands_processed"]), int(stats["total_net_input_bytes"]),
                   int(stats["total_net_output_bytes"]))


def make_org(url: str) -> str:
    async def create() -> str:
        import redis.asyncio as aioredis

        connection = aioredis.Redis.from_url(url)
        try:
            made = await OrganisationStore(connection).create("capacity", quota=10_000_000, concurrency=10_000)
        finally:
            await connection.aclose()
        return made.access_key

    return asyncio.run(create())


SCENARIOS = {
    "simple page, png 1280x1024": {"url": "/bench/simple.html"},
    "simple page, jpeg": {"url": "/bench/simple.html", "format": "jpeg"},
    "heavy page (3 MB images and fonts)": {"url": "/bench/heavy.html"},
    "full page 10,000 px": {"url": "/bench/full.html?height=10000", "full_page": "true"},
    "pdf": {"url": "/bench/simple.html", "format": "pdf"},
}


def real_captures(shots: int) -> None:
    from bench.pages import serve_bench_pages

    serve_bench_pages()
    directory = Path(tempfile.mkdtemp(prefix="capacity-"))
    with Site() as site, redis_server(directory) as url, running_service(url, directory, workers=1) as service:
        key = make_org(url)
        api, worker = service.processes["api"].pid, service.processes["worker0"].pid
        rpid = redis_pid(url)
        print("| scenario | wall s | worker CPU s | API CPU ms | Redis CPU ms | Redis commands | Redis bytes in/out "
              "| result bytes |")
        print("|---|---|---|---|---|---|---|---|")
        with httpx.Client(base_url=service.url, timeout=120) as http:
            for name, params in SCENARIOS.items():
                query = {**params, "access_key": key, "url": site.url(params["url"])}
                http.get("/v1/screenshot/take", params=query).raise_for_status()  # warm
                before = (cpu_seconds(process_tree(worker)), cpu_seconds(process_tree(api)), cpu_seconds([rpid]),
                          Counters.read(url), time.monotonic())
                sizes = []
                for _ in range(shots):
                    response = http.get("/v1/screenshot/take", params=query)
                    response.raise_for_status()
                    sizes.append(len(response.content))
                after = (cpu_seconds(process_tree(worker)), cpu_seconds(process_tree(api)), cpu_seconds([rpid]),
                         Counters.read(url), time.monotonic())
                counts = after[3].commands - before[3].commands
                print(f"| {name} | {(after[4] - before[4]) / shots:.2f} | {(after[0] - before[0]) / shots:.2f} | "
                      f"{(after[1] - before[1]) / shots * 1000:.1f} | {(after[2] - before[2]) / shots * 1000:.2f} | "
                      f"{counts / shots:.0f} | {(after[3].bytes_in - before[3].bytes_in) / shots / 1024:.0f} KiB / "
                      f"{(after[3].bytes_out - before[3].bytes_out) / shots / 1024:.0f} KiB | "
                      f"{statistics.median(sizes) / 1024:.0f} KiB |", flush=True)


# --- the queue path with fake workers ----------------------------------------------------------------------

def fake_worker(url: str, name: str, body: bytes, stop_event: Any) -> None:
    """Take jobs from the common lane and answer each at once with `body`, as a worker's protocol does."""
    connection = redis.Redis.from_url(url, socket_timeout=10)
    while not stop_event.is_set():
        for taken in lanes.take(connection, name, [LANE_KEY], 1):
            if not lanes.start(connection, name, taken):
                continue
            job = JobRequest.from_json(orjson.loads(taken.job))
            now = time.time()
            result = JobResult(job.reference, ok=True, rendering_seconds=0.001, content_type="image/png",
                               size_bytes=len(body), format="png", width=1280, height=1024, body=body,
                               started_at=now, finished_at=now)
            with connection.pipeline(transaction=False) as pipe:
                record_job(pipe, job.reference, result.record_fields())
                pipe.hset(result_key(job.reference), mapping=result.to_redis())
                pipe.expire(result_key(job.reference), 300)
                pipe.publish(getattr(job.answer, "reply_channel", ""), job.reference)
                pipe.execute()
            lanes.done(connection, name, taken)


def heartbeats(url: str, names: list[str], stop_event: Any) -> None:
    connection = redis.Redis.from_url(url)
    while not stop_event.is_set():
        with connection.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.set(alive_key(name), "1", ex=ALIVE_TTL_SECONDS)
                pipe.zadd(WORKERS_SEEN_KEY, {name: time.time()})
            pipe.execute()
        stop_event.wait(1)


def fake_workers(url: str, names: list[str], body: bytes, stop_event: Any) -> None:
    """A process of fake workers, one thread each, and their heartbeats (the load runs in another process)."""
    threads = [threading.Thread(target=fake_worker, args=(url, name, body, stop_event)) for name in names]
    threads.append(threading.Thread(target=heartbeats, args=(url, names, stop_event)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


async def load(urls: list[str], key: str, clients: int, seconds: float) -> tuple[int, list[float]]:
    """`clients` concurrent clients, each sending captures one after another for `seconds`."""
    done, latencies = 0, []
    deadline = time.monotonic() + seconds

    async def client(number: int) -> None:
        nonlocal done
        async with httpx.AsyncClient(base_url=urls[number % len(urls)], timeout=60) as http:
            while time.monotonic() < deadline:
                started = time.monotonic()
                response = await http.get("/v1/screenshot/take", params={"access_key": key,
                                                                          "url": "http://127.0.0.1:9/page"})
                assert response.status_code == 200, response.text
                latencies.append(time.monotonic() - started)
                done += 1

    await asyncio.gather(*(client(number) for number in range(clients)))
    return done, latencies


def queue_path(seconds: float, body_kib: int) -> None:
    directory = Path(tempfile.mkdtemp(prefix="capacity-queue-"))
    body = os.urandom(body_kib * 1024)
    print(f"Queue path: fake workers answering at once with {body_kib} KiB, {seconds:.0f} s per step.")
    print("| APIs | clients | captures/s | p50 ms | API CPU ms/capture | Redis CPU ms/capture | Redis commands/capture "
          "| Redis bytes in/out per capture | Redis CPU busy |")
    print("|---|---|---|---|---|---|---|---|---|")
    with redis_server(directory) as url:
        key = make_org(url)
        rpid = redis_pid(url)
        for apis in (1, 2):
            ports = [free_port() for _ in range(apis)]
            env = service_env(url, directory, ports[0], SCREENSHOT_ACCESS_LOG="false", SCREENSHOT_MAX_QUEUE="5000")
            processes = [start("api", {**env, "SCREENSHOT_PORT": str(port)}) for port in ports]
            urls = [f"http://127.0.0.1:{port}" for port in ports]
            stop_event = multiprocessing.Event()
            names = [f"fake.{os.getpid()}.{n}" for n in range(8)]
            pool = multiprocessing.Process(target=fake_workers, args=(url, names, body, stop_event))
            pool.start()
            try:
                for each in urls:
                    wait_for(lambda each=each: httpx.get(f"{each}/healthz").status_code == 200, 30, "the API")
                asyncio.run(load(urls, key, 8, 2))  # warm
                for clients in (16, 64):
                    pids = [pid for process in processes for pid in process_tree(process.pid)]
                    before = (cpu_seconds(pids), cpu_seconds([rpid]), Counters.read(url), time.monotonic())
                    done, latencies = asyncio.run(load(urls, key, clients, seconds))
                    after = (cpu_seconds(pids), cpu_seconds([rpid]), Counters.read(url), time.monotonic())
                    elapsed = after[3] - before[3]
                    redis_cpu = after[1] - before[1]
                    print(f"| {apis} | {clients} | {done / elapsed:.0f} | {statistics.median(latencies) * 1000:.0f} | "
                          f"{(after[0] - before[0]) / done * 1000:.2f} | {redis_cpu / done * 1000:.3f} | "
                          f"{(after[2].commands - before[2].commands) / done:.1f} | "
                          f"{(after[2].bytes_in - before[2].bytes_in) / done / 1024:.1f} KiB / "
                          f"{(after[2].bytes_out - before[2].bytes_out) / done / 1024:.1f} KiB | "
                          f"{redis_cpu / elapsed * 100:.0f}% |", flush=True)
            finally:
                stop_event.set()
                stop(processes)
                pool.join(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["real", "queue", "both"], default="both")
    parser.add_argument("--shots", type=int, default=10, help="captures per scenario (real part)")
    parser.add_argument("--seconds", type=float, default=15, help="seconds per load step (queue part)")
    parser.add_argument("--body-kib", type=int, default=60, help="the fake result's size (queue part)")
    args = parser.parse_args()
    if args.part in ("real", "both"):
        real_captures(args.shots)
    if args.part in ("queue", "both"):
        queue_path(args.seconds, args.body_kib)


if __name__ == "__main__":
    main()
