"""Prometheus metrics of one API process (unauthenticated, no secrets)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from render.queue.lane_scripts import CLASSES, QUEUE_WAIT_BUCKETS

# No `<name>_created` series beside each counter and histogram: a timestamp per series that scrapers store
# as a sample of its own and that nothing here reads.
disable_created_metrics()


class SharedCounters(Collector):
    """Counts kept in Redis by the workers and deliverers (render.queue.keys.COUNTERS_KEY): the same
    service-wide totals on every API process. `snapshot` is refreshed by /metrics before each export."""

    def __init__(self) -> None:
        self.snapshot: dict[str, int] = {}
        self.waits: dict[str, dict[str, float]] = {}  # by class: the hand-off's histogram (bucket bound, count, sum)
        self.backlog: list[tuple[str, int]] = []  # (organisation, jobs waiting): the largest, then "other"

    def collect(self) -> Iterator[Metric]:
        waits = HistogramMetricFamily("screenshot_queue_wait_seconds", "Time jobs waited in their lane for a "
                                      "worker, by class (interactive: a client waits; heavy: a client waits for a "
                                      "long capture; batch: async captures, bulk entries, monitor runs), all jobs of "
                                      "every API.", labels=["class"])
        for job_class in CLASSES:
            counted = self.waits.get(job_class, {})
            buckets = [(str(float(bound)), counted.get(str(bound), 0.0)) for bound in QUEUE_WAIT_BUCKETS]
            waits.add_metric([job_class], [*buckets, ("+Inf", counted.get("count", 0.0))],
                             sum_value=counted.get("sum", 0.0))
        yield waits
        backlog = GaugeMetricFamily("screenshot_queue_backlog", "Jobs waiting for a worker by organisation: the "
                                    "largest backlogs by id, the rest together as `other`.", labels=["organisation"])
        for org, count in self.backlog:
            backlog.add_metric([org], count)
        yield backlog
        restarts = CounterMetricFamily("screenshot_browser_restarts", "Chromium restarts (crash, hung tab, "
                                       "every N jobs), all workers.")
        restarts.add_metric([], self.snapshot.get("browser_restarts", 0))
        yield restarts
        reused = CounterMetricFamily("screenshot_browser_contexts_reused", "Jobs served a browser context kept "
                                     "from the same organisation's previous job (wiped), all workers.")
        reused.add_metric([], self.snapshot.get("contexts_reused", 0))
        yield reused
        reliefs = CounterMetricFamily("screenshot_browser_memory_reliefs", "Times Chromium was told to free its "
                                      "caches after a job left it above SCREENSHOT_CHROMIUM_MEMORY_MB, all workers.")
        reliefs.add_metric([], self.snapshot.get("browser_memory_reliefs", 0))
        yield reliefs
        storage = CounterMetricFamily("screenshot_storage_failures", "Calls of the workers to the result store (and "
                                      "store=true uploads) that failed, by reason (timeout: no answer within "
                                      "SCREENSHOT_STORAGE_TIMEOUT; error: refused or unreachable); retried: "
                                      "async jobs' tries again.", labels=["reason"])
        for reason, field in (("timeout", "storage_timeouts"), ("error", "storage_errors"),
                              ("retried", "storage_retries")):
            storage.add_metric([reason], self.snapshot.get(field, 0))
        yield storage
        webhooks = CounterMetricFamily("screenshot_webhook_deliveries", "Webhook delivery attempts by outcome "
                                       "(delivered, failed_attempt, given_up).", labels=["outcome"])
        for outcome, field in (("delivered", "webhook_delivered"), ("failed_attempt", "webhook_failed_attempts"),
                               ("given_up", "webhook_given_up")):
            webhooks.add_metric([outcome], self.snapshot.get(field, 0))
        yield webhooks
        runs = CounterMetricFamily("screenshot_monitor_runs", "Monitor runs finished, by outcome (unchanged, changed: "
                                   "more than its change_threshold; failed).", labels=["outcome"])
        finished, changed, failed = (self.snapshot.get(f"monitor_{name}", 0) for name in ("runs", "changes",
                                                                                           "failures"))
        for outcome, count in (("unchanged", finished - changed - failed), ("changed", changed), ("failed", failed)):
            runs.add_metric([outcome], count)
        yield runs
        skipped = CounterMetricFamily("screenshot_monitor_runs_skipped", "Monitor runs skipped: due while the "
                                      "monitor's run before them was still waiting or rendering.")
        skipped.add_metric([], self.snapshot.get("monitor_skipped", 0))
        yield skipped


class Metrics:
    """The API's metrics, in a registry of their own (one per app, none at import time)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "screenshot_requests_total", "Requests by route and outcome (error code or ok).",
            ["route", "code"], registry=self.registry)
        self.render_seconds = Histogram(
            "screenshot_render_seconds", "Time workers spent on successful captures.",
            buckets=(0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10, 30, 90), registry=self.registry)
        self.request_seconds = Histogram(
            "screenshot_request_seconds", "End-to-end time of capture requests.",
            buckets=(0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10, 30, 90), registry=self.registry)
        self.refusals = Counter(
            "screenshot_refusals_total", "Requests refused for load, by reason (queue_share: the organisation has its "
            "share of a full queue waiting; concurrency_limit_reached, screenshots_limit_reached: its plan; "
            "redis_unavailable).", ["reason"], registry=self.registry)
        self.blocked_requests = Counter(
            "screenshot_blocked_requests_total", "Connections of captured pages refused, by policy.",
            ["policy"], registry=self.registry)
        self.cache = Counter(
            "screenshot_cache_lookups_total", "Cached requests by result (hit, miss, stale: served while refreshed).",
            ["result"], registry=self.registry)
        self.shared = SharedCounters()
        self.registry.register(self.shared)
        self.queue_depth = Gauge(
            "screenshot_queue_depth", "Jobs waiting for a worker, every lane of every region (read from Redis "
            "at each scrape; the same on every API process).", registry=self.registry)
        self.workers = Gauge(
            "screenshot_workers", "Render workers alive, by state (busy: rendering a job; read from their "
            "heartbeats at each scrape, at most a second old; the same on every API process).", ["state"],
            registry=self.registry)
        self.in_flight = Gauge(
            "screenshot_captures_in_flight", "Capture requests this API process is waiting on a worker for.",
            registry=self.registry)
