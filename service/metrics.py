"""Prometheus metrics of one API process (unauthenticated, no secrets)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


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
        self.queue_wait_seconds = Histogram(
            "screenshot_queue_wait_seconds", "Time from enqueue until a worker started the job.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry)
        self.blocked_requests = Counter(
            "screenshot_blocked_requests_total", "Connections of captured pages refused, by policy.",
            ["policy"], registry=self.registry)
        self.queue_depth = Gauge(
            "screenshot_queue_depth", "Jobs waiting for a worker (sampled at each request).",
            registry=self.registry)
