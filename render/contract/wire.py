"""What crosses the queue between the API and the workers, as JSON: a `JobRequest` one way, a `JobResult` back.

A job says what it runs (`work`: a `Capture`, `Variants` of one page, or a `Compare`) apart from how its outcome
is answered (`answer`: a `Waiting` API, or a `Recorded` outcome nobody waits for). Whatever it runs, its worker
ends it in one place (render.queue.endings): a waiting API gets the `JobResult` on its reply channel (whole when
its bodies are small: `to_message`), a recorded one is kept for GET /jobs/{reference}. Pure module: the API
imports it without Playwright.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import orjson
from redis.typing import EncodableT, FieldT

from render.contract.comparing import COMPARE_KIND, CompareJob
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


# How a job is answered.

@dataclass(frozen=True)
class Waiting:
    """A client waits: the API that offered the job reads its result on its reply channel."""

    reply_channel: str
    deadline: float  # UNIX seconds after which the job is abandoned
    by: Literal["waiting"] = "waiting"


@dataclass(frozen=True)
class Recorded:
    """Nobody waits: the worker keeps the outcome in the job's record (GET /jobs/{reference}) and owes its webhook.
    The timeout runs from when a worker starts the job (`deadline`, 0 until then)."""

    timeout: float
    deadline: float = 0.0
    monitor: MonitorOrder | None = None  # a monitor's run: compared with its last, kept in its history
    by: Literal["record"] = "record"


Answer = Waiting | Recorded


# What a job runs.

@dataclass(frozen=True)
class Capture:
    """A page loaded and one output made of it, with the options model `model` names ("take", or "animate":
    registered by the worker command)."""

    options: dict[str, Any]  # what may be stored of the options; the secrets are in `sealed`
    # The caller's credentials (target, bucket, vision provider), sealed in one token for this job's worker
    # (render.contract.sealing.seal_job).
    sealed: str | None = None
    model: str = "take"
    store: bool = False  # kept in the service's storage (a link answers), not only returned as bytes
    store_key: str | None = None  # stored under this key (the cache's) instead of the default
    keep_body: bool = False  # the bytes returned even though they were stored
    what: Literal["capture"] = "capture"


@dataclass(frozen=True)
class Variant:
    """One more output of a `Variants` job's page: its own reference, options and storing."""

    reference: str
    options: dict[str, Any]
    store: bool


@dataclass(frozen=True)
class Variants:
    """Bulk `optimize`: the page loaded once with `page`'s options (credentials included), and every variant's
    output derived from it."""

    page: Capture
    others: list[Variant]
    what: Literal["variants"] = "variants"


@dataclass(frozen=True)
class Compare:
    """Two stored shots compared, no browser: the diff stored, the change in the result's metadata."""

    order: CompareJob
    keep_body: bool = False
    what: Literal["compare"] = "compare"


Work = Capture | Variants | Compare


@dataclass(frozen=True)
class JobRequest:
    """One job for a worker: what it runs and how it is answered."""

    reference: str
    organisation: str
    trace_id: str
    work: Work
    answer: Answer
    webhook: WebhookOrder | None = None  # whoever ends the job queues its delivery
    enqueued_at: float = 0.0  # UNIX seconds, for the queue-wait metric

    @property
    def deadline(self) -> float:
        """UNIX seconds after which the job is abandoned (a recorded job's: 0 until a worker starts it)."""
        return self.answer.deadline

    @property
    def monitor(self) -> MonitorOrder | None:
        return self.answer.monitor if isinstance(self.answer, Recorded) else None

    @property
    def capture(self) -> Capture | None:
        """The capture that loads the page (a `Variants` job's first), None for a compare job."""
        return self.work if isinstance(self.work, Capture) else self.work.page if isinstance(self.work, Variants) \
            else None

    @property
    def kind(self) -> str:
        """What runs, by name: the capture's model ("take", "animate"), or "compare"."""
        capture = self.capture
        return capture.model if capture is not None else COMPARE_KIND

    @property
    def options(self) -> dict[str, Any]:
        """The options as they may be stored (a compare job's: its order)."""
        capture = self.capture
        return capture.options if capture is not None else asdict(self.work)["order"]

    def started(self, now: float) -> JobRequest:
        """A recorded job as a worker starts it: its timeout runs from `now`."""
        if isinstance(self.answer, Recorded):
            return replace(self, answer=replace(self.answer, deadline=now + self.answer.timeout))
        return self

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobRequest:
        if "work" not in data:
            return _from_flat(data)
        answer, work, webhook = data["answer"], data["work"], data.get("webhook")
        if answer["by"] == "waiting":
            told: Answer = Waiting(**answer)
        else:
            monitor = answer.get("monitor")
            told = Recorded(**{**answer, "monitor": MonitorOrder(**monitor) if monitor else None})
        return cls(reference=data["reference"], organisation=data["organisation"], trace_id=data["trace_id"],
                   work=_work(work), answer=told, webhook=WebhookOrder(**webhook) if webhook else None,
                   enqueued_at=data.get("enqueued_at", 0.0))


def _work(data: dict[str, Any]) -> Work:
    if data["what"] == "variants":
        return Variants(page=Capture(**data["page"]), others=[Variant(**each) for each in data["others"]])
    if data["what"] == "compare":
        return Compare(order=CompareJob(**data["order"]), keep_body=data.get("keep_body", False))
    return Capture(**data)


def _from_flat(data: dict[str, Any]) -> JobRequest:
    """A job an earlier version offered, whose fields were all at one level (still in a lane, or kept in an async
    job's record for the sweep), as today's."""
    monitor, webhook = data.get("monitor"), data.get("webhook")
    answer: Answer = (Recorded(timeout=data.get("timeout", 0.0), deadline=data.get("deadline", 0.0),
                               monitor=MonitorOrder(**monitor) if monitor else None)
                      if data.get("async_") or not data.get("reply_channel")
                      else Waiting(reply_channel=data["reply_channel"], deadline=data.get("deadline", 0.0)))
    kind = data.get("kind", "take")
    work: Work
    if kind == COMPARE_KIND:
        work = Compare(order=CompareJob(**data["options"]), keep_body=data.get("keep_body", False))
    else:
        capture = Capture(options=data.get("options", {}), sealed=data.get("sealed"), model=kind,
                          store=data.get("store_result", False), store_key=data.get("store_key"),
                          keep_body=data.get("keep_body", False))
        variants = data.get("variants")
        work = Variants(page=capture, others=[Variant(**each) for each in variants]) if variants else capture
    return JobRequest(reference=data["reference"], organisation=data["organisation"],
                      trace_id=data.get("trace_id", ""), work=work, answer=answer,
                      webhook=WebhookOrder(**webhook) if webhook else None, enqueued_at=data.get("enqueued_at", 0.0))


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
