"""What crosses the queue between the API and the workers, as JSON: a `JobRequest` one way, a `JobResult` back.

The API offers a `JobRequest` on a lane (render.queue.lanes); for a job its client waits for, the worker
stores the `JobResult` under `result_key(reference)` and publishes it on the request's reply channel
(render.queue.keys): the whole result when its bodies are small (`to_message`), so the waiting API needs no
more round trips, else its reference only. Pure module: the API imports it without Playwright.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
from redis.typing import EncodableT, FieldT

from render.contract.monitors import MonitorOrder


@dataclass(frozen=True)
class WebhookOrder:
    """Where a job's outcome is posted (`webhook_url`) and how the delivery is retried, fixed by the API
    that accepted the job (SCREENSHOT_WEBHOOK_RETRY_SCHEDULE, SCREENSHOT_WEBHOOK_TIMEOUT)."""

    url: str
    sign: bool
    errors: bool  # webhook_errors: failures are delivered too
    schedule: list[int]  # seconds between attempts
    timeout: float  # seconds an attempt may take


@dataclass(frozen=True)
class JobRequest:
    """One capture to run: the validated options and where the answer goes."""

    reference: str
    organisation: str
    options: dict[str, Any]
    trace_id: str
    deadline: float  # UNIX seconds after which the job is abandoned
    reply_channel: str | None = None
    store_result: bool = False  # upload to storage (response_type=json) instead of returning bytes
    enqueued_at: float = 0.0  # UNIX seconds, for the queue-wait metric
    store_key: str | None = None  # store the output under this key (the cache's), instead of the default
    keep_body: bool = False  # return the bytes even though they were stored
    async_: bool = False  # nobody waits: the deadline starts when a worker picks the job up
    timeout: float = 0.0  # the capture's timeout, for async jobs
    # Bulk `optimize`: further outputs of the same page, each {"reference", "options", "store"}; the
    # page is loaded once with `options` and every variant's output derived from it.
    variants: list[dict[str, Any]] | None = None
    kind: str = "take"  # the options model and routine: "take", or "animate" (registered by the worker command)
    # The caller's credentials (target, bucket, vision provider), taken out of `options` and sealed in one
    # token for this job's worker (render.contract.sealing.seal_job).
    sealed: str | None = None
    webhook: WebhookOrder | None = None  # async and webhook jobs: whoever finishes the job queues its delivery
    monitor: MonitorOrder | None = None  # a monitor's run: compared with its last, kept in its history

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobRequest:
        webhook, monitor = data.get("webhook"), data.get("monitor")
        return cls(**{**data, "webhook": WebhookOrder(**webhook) if webhook else None,
                      "monitor": MonitorOrder(**monitor) if monitor else None})


@dataclass(frozen=True)
class StoredSlice:
    """One band of a full_page_slices capture, as stored (its manifest lists them)."""

    index: int
    offset_y: int
    width: int
    height: int
    key: str  # in the service's storage


@dataclass(frozen=True)
class StoredCopy:
    """store=true: where the caller's own bucket has the output."""

    bucket: str
    key: str
    location: str | None  # its URL, with storage_return_location


@dataclass
class JobResult:
    """Outcome of a job: either the output (bytes or a stored object) or an error payload."""

    reference: str
    ok: bool
    rendering_seconds: float = 0.0
    content_type: str = ""
    size_bytes: int = 0
    format: str = ""
    width: int | None = None
    height: int | None = None
    storage_key: str | None = None
    error: dict[str, Any] | None = None
    acquire_seconds: float = 0.0  # how long the job waited for its tab (profiling)
    blocked_requests: int = 0  # connections the network policy refused
    metadata: dict[str, Any] = field(default_factory=dict)  # the metadata_* facts (render.output.metadata)
    vision_completion: str | None = None
    # What was stored beside the result, by name (metadata_content's "content", "accessibility"): storage keys.
    artefacts: dict[str, str] = field(default_factory=dict)
    content_key: str | None = None  # metadata_content's key in results cached before `artefacts` (read only)
    stored_copy: StoredCopy | None = None
    slices: list[StoredSlice] = field(default_factory=list)
    slices_manifest: str | None = None  # the stored manifest of `slices`
    timings: dict[str, Any] = field(default_factory=dict)  # render.contract.timings.Stopwatch.report()
    settled: bool = False  # the worker settled the job's quota slot itself (render.queue.ledger)
    started_at: float = 0.0  # UNIX seconds when a worker picked the job up
    finished_at: float = 0.0  # UNIX seconds when the result was ready
    body: bytes = b""
    variants: list[JobResult] = field(default_factory=list)  # the other outputs of an optimized job

    def meta(self) -> dict[str, Any]:
        """Everything but the bytes, JSON-safe."""
        data = asdict(self)
        data.pop("body")
        data["variants"] = [variant.meta() for variant in self.variants]
        return data

    def record_fields(self) -> dict[str, str]:
        """The finished job's fields in its record (`job_key`, GET /jobs/{reference})."""
        if self.ok:
            return {"status": "done", "storage_key": self.storage_key or "", "content_type": self.content_type}
        return {"status": "failed", "error": orjson.dumps(self.error or {}).decode()}

    def to_redis(self) -> dict[FieldT, EncodableT]:
        fields: dict[FieldT, EncodableT] = {"meta": orjson.dumps(self.meta()), "body": self.body}
        for index, variant in enumerate(self.variants):
            fields[f"body:{index}"] = variant.body
        return fields

    def to_message(self, limit: int) -> bytes:
        """The result as one message: its reference alone when its bodies pass `limit` bytes (the reader then
        takes it from `result_key`), else its meta's JSON, a newline and the bodies one after the other."""
        bodies = [self.body, *(variant.body for variant in self.variants)]
        if sum(map(len, bodies)) > limit:
            return self.reference.encode()
        return orjson.dumps([self.meta(), [len(body) for body in bodies]]) + b"\n" + b"".join(bodies)

    @classmethod
    def from_message(cls, message: bytes) -> tuple[str, JobResult | None]:
        """The reference a `to_message` message is about, and the result when it holds it."""
        head, newline, rest = message.partition(b"\n")
        if not newline:
            return head.decode(), None
        meta, sizes = orjson.loads(head)
        bodies, offset = [], 0
        for size in sizes:
            bodies.append(rest[offset:offset + size])
            offset += size
        result = cls.from_meta(meta, bodies[0])
        for variant, body in zip(result.variants, bodies[1:], strict=True):
            variant.body = body
        return result.reference, result

    @classmethod
    def from_meta(cls, meta: dict[str, Any], body: bytes = b"") -> JobResult:
        meta = {name: value for name, value in meta.items() if name in _RESULT_FIELDS}
        variants = [cls.from_meta(v) for v in meta.pop("variants", [])]
        stored_copy = meta.pop("stored_copy", None)
        slices = [StoredSlice(**piece) for piece in meta.pop("slices", [])]
        return cls(**meta, body=body, variants=variants, slices=slices,
                   stored_copy=StoredCopy(**stored_copy) if stored_copy else None)

    @classmethod
    def from_redis(cls, fields: dict[bytes, bytes]) -> JobResult:
        result = cls.from_meta(orjson.loads(fields[b"meta"]), fields.get(b"body", b""))
        for index, variant in enumerate(result.variants):
            variant.body = fields.get(f"body:{index}".encode(), b"")
        return result


# What a stored result may hold: results kept by an older version (a cache entry lives up to 30 days) may
# have fields this one no longer has.
_RESULT_FIELDS = frozenset(JobResult.__dataclass_fields__)
