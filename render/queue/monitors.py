"""Monitors in Redis (render.contract.monitors): each one's hash, its organisation's set, its history of runs.

The API writes a monitor's spec and bumps its revision on every change; deliverers fire its runs
(render.queue.rq_jobs.fire) and write when the next is due; the worker that finishes a run records it here
(`record_run`, from render.queue.endings.end): the history, the last success (what the next run is compared
with), the failures in a row and the pause they may cause, and whether the run's webhook is owed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson
import redis

from render.contract.comparing import Change
from render.contract.monitors import MonitorSpec
from render.contract.wire import JobRequest, JobResult
from render.queue.keys import COUNTERS_KEY, MONITORS_DUE_KEY, job_key, monitor_key, monitor_runs_key, monitors_key
from render.queue.redis_client import text
from render.queue.scripts import LuaScript


@dataclass
class Monitor:
    """A monitor as stored: its spec (the request without secrets) and what its runs left."""

    id: str
    organisation: str
    spec: MonitorSpec
    sealed: str | None = None  # the request's secrets, sealed for `monitor:<id>` (render.contract.sealing)
    revision: int = 1  # bumped by every change; a run fired for an older revision is dropped
    created: float = 0.0
    updated: float = 0.0
    next_run: int | None = None  # UNIX seconds
    failures_in_row: int = 0
    paused_reason: str | None = None  # why it paused itself (failures in a row)
    last_success: dict[str, str] | None = None  # {reference, key}: what the next run is compared with
    last_run: dict[str, Any] | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def fields(self) -> dict[str, str]:
        """The hash's fields (all of them: a monitor is written whole only when created)."""
        return {
            "organisation": self.organisation, "spec": self.spec.model_dump_json(), "sealed": self.sealed or "",
            "revision": str(self.revision), "created": repr(self.created), "updated": repr(self.updated),
            "next_run": str(self.next_run or ""), "failures_in_row": str(self.failures_in_row),
            "paused_reason": self.paused_reason or "",
            "last_success": orjson.dumps(self.last_success).decode() if self.last_success else "",
            "last_run": orjson.dumps(self.last_run).decode() if self.last_run else ""}

    @classmethod
    def from_fields(cls, monitor_id: str, raw: dict[Any, Any]) -> Monitor:
        data = {text(k): text(v) for k, v in raw.items()}
        return cls(
            id=monitor_id, organisation=data["organisation"], spec=MonitorSpec.model_validate_json(data["spec"]),
            sealed=data.get("sealed") or None, revision=int(data.get("revision") or 1),
            created=float(data.get("created") or 0), updated=float(data.get("updated") or 0),
            next_run=int(data["next_run"]) if data.get("next_run") else None,
            failures_in_row=int(data.get("failures_in_row") or 0), paused_reason=data.get("paused_reason") or None,
            last_success=orjson.loads(data["last_success"]) if data.get("last_success") else None,
            last_run=orjson.loads(data["last_run"]) if data.get("last_run") else None)


def load(connection: redis.Redis, monitor_id: str) -> Monitor | None:
    raw = connection.hgetall(monitor_key(monitor_id))
    return Monitor.from_fields(monitor_id, raw) if raw else None


# The count and the creation in one step: concurrent creates cannot pass the limit together.
CREATE_WITHIN = LuaScript(
    "CREATE_WITHIN", keys=["the organisation's monitors (monitors_key)", "the new monitor (monitor_key)"],
    args=["the most monitors an organisation keeps", "the monitor's id", "its fields and values, alternating ..."],
    returns="1 when created; 0 when the organisation has that many already (nothing stored)", body="""
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('SADD', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[2], unpack(ARGV, 3))
return 1
""")


def create(connection: redis.Redis, monitor: Monitor, most: int) -> bool:
    """Store a new monitor unless its organisation already has `most`; False then (nothing stored)."""
    fields = [item for pair in monitor.fields().items() for item in pair]
    created = CREATE_WITHIN.on(connection)(
        keys=[monitors_key(monitor.organisation), monitor_key(monitor.id)], args=[most, monitor.id, *fields])
    return bool(created)


def change(connection: redis.Redis, monitor: Monitor, spec: MonitorSpec, sealed: str | None) -> Monitor:
    """A new spec (and sealed secrets) for `monitor`: its revision bumped, a pause by failures lifted when it is
    resumed. Returns the monitor as stored now."""
    revision = int(connection.hincrby(monitor_key(monitor.id), "revision", 1))
    fields = {"spec": spec.model_dump_json(), "sealed": sealed or "", "updated": repr(time.time())}
    if not spec.paused:
        fields.update(paused_reason="", failures_in_row="0")
    connection.hset(monitor_key(monitor.id), mapping=fields)  # type: ignore[arg-type]
    updated = load(connection, monitor.id)
    assert updated is not None and updated.revision >= revision
    return updated


def delete(connection: redis.Redis, monitor: Monitor) -> None:
    with connection.pipeline(transaction=True) as pipe:
        pipe.delete(monitor_key(monitor.id), monitor_runs_key(monitor.id))
        pipe.srem(monitors_key(monitor.organisation), monitor.id)
        pipe.zrem(MONITORS_DUE_KEY, monitor.id)
        pipe.execute()


def ids_of(connection: redis.Redis, organisation: str) -> list[str]:
    return sorted(text(raw) for raw in connection.smembers(monitors_key(organisation)))


def started(connection: redis.Redis, monitor_id: str, reference: str) -> None:
    """`reference` is the monitor's run under way now (offered to the workers)."""
    connection.hset(monitor_key(monitor_id), "running", reference)


def under_way(connection: redis.Redis, monitor_id: str) -> str | None:
    """The monitor's last started run while it is still waiting or rendering, else None: a monitor runs one run at
    a time (a run due meanwhile is skipped), so that each run is compared with the one before it and failures in a
    row are counted in order."""
    reference = connection.hget(monitor_key(monitor_id), "running")
    if not reference:
        return None
    status = connection.hget(job_key(text(reference)), "status")
    return text(reference) if status is not None and text(status) in ("queued", "rendering") else None


def runs(connection: redis.Redis, monitor_id: str, limit: int) -> list[dict[str, Any]]:
    """The latest `limit` runs, newest first."""
    return [orjson.loads(raw) for raw in connection.lrange(monitor_runs_key(monitor_id), 0, limit - 1)]


def run_of(job: JobRequest, result: JobResult) -> dict[str, Any]:
    """A run's record: when, how it ended, what changed since the last success (None on the first)."""
    assert job.monitor is not None
    comparison = result.metadata.get("comparison") if result.ok else None
    run: dict[str, Any] = {
        "reference": job.reference, "due": job.monitor.due, "finished": time.time(),
        "status": "done" if result.ok else "failed", "change": comparison,
        "previous_reference": result.metadata.get("previous_reference") if comparison else None}
    if result.ok:
        run.update(storage_key=result.storage_key, diff_key=result.artefacts.get("diff"),
                   width=result.width, height=result.height)
    else:
        run.update(error_code=(result.error or {}).get("error_code"),
                   error_message=(result.error or {}).get("error_message"))
    return run


def record_run(connection: redis.Redis, job: JobRequest, result: JobResult) -> dict[str, Any] | None:
    """Keep a finished run in its monitor's history and state; the run's record when its webhook is owed (a
    change, every success without only_on_change, a failure with webhook_errors), else None."""
    assert job.monitor is not None
    monitor = load(connection, job.monitor.monitor)
    if monitor is None:  # deleted while the run was rendering
        return None
    spec = monitor.spec
    run = run_of(job, result)
    # None: nothing to compare with (a failure, or the first run: the baseline).
    run["changed"] = (None if run["change"] is None
                      else Change.from_json(run["change"]).changed(spec.change_threshold))
    failures = 0 if result.ok else monitor.failures_in_row + 1
    counters = ["monitor_runs", *(["monitor_changes"] if run["changed"] else []),
                *([] if result.ok else ["monitor_failures"])]
    key = monitor_key(monitor.id)
    with connection.pipeline(transaction=True) as pipe:
        pipe.lpush(monitor_runs_key(monitor.id), orjson.dumps(run))
        pipe.ltrim(monitor_runs_key(monitor.id), 0, spec.keep_runs - 1)
        pipe.hset(key, mapping={"last_run": orjson.dumps(run).decode(), "failures_in_row": str(failures)})
        if result.ok:
            pipe.hset(key, "last_success", orjson.dumps({"reference": job.reference, "key": result.storage_key}))
        elif spec.pause_after_failures and failures >= spec.pause_after_failures and not spec.paused:
            pipe.hset(key, mapping={"spec": spec.model_copy(update={"paused": True}).model_dump_json(),
                                    "paused_reason": f"{failures} failed run{'s' if failures > 1 else ''} in a row"})
            pipe.hincrby(key, "revision", 1)
            pipe.zrem(MONITORS_DUE_KEY, monitor.id)
        for counter in counters:
            pipe.hincrby(COUNTERS_KEY, counter, 1)
        pipe.execute()
    if spec.webhook_url is None:
        return None
    if not result.ok:
        return run if spec.webhook_errors else None
    return run if run["changed"] or not spec.only_on_change else None
