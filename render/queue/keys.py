"""Every Redis key, channel and queue name the service uses, in one place (the API, workers and deliverers
all read them from here; `redis-cli --scan` output can be matched against this list).

| key | type | written by | lifetime |
|---|---|---|---|
| `orgs` | set | `keys create` | forever |
| `org:<id>` | hash | `keys create/revoke` | forever |
| `accesskey:<sha256>` | string | `keys create` | until revoked |
| `config:url_signing_secret` | string | the first API | forever |
| `slots:<org>` | sorted set | quota reserve/settle | entries expire by score |
| `usage:<org>:<YYYY-MM>` | counter | quota settle | 400 days |
| `queue:render[@region]:waiting` | list | the API (sync captures) | until popped |
| `rq:queue:render[@region]`, `rq:queue:webhooks` | RQ | the API, workers | RQ's |
| `jobs:async:offered` | hash | the API | until claimed |
| `jobs:async:in-flight` | set | workers | until finished |
| `job:<reference>` | hash | API and workers | 7 days |
| `result:<reference>` | hash | workers | 5 minutes |
| `results:<uuid>` | channel | the waiting API | |
| `alive:<worker>` | string | workers | 3 seconds |
| `workers:seen`, `workers:busy` | hash | workers | heartbeat |
| `metrics:counters` | hash | workers, deliverers | forever |
| `cache:<digest>`, `cache-lock:<digest>` | string | the API | cache_ttl, seconds |
| `sweep:<reference>`, `reoffer:<reference>` | string | the API's sweepers | seconds |
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

# --- queues --------------------------------------------------------------------------------------
QUEUE_NAME = "render"  # RQ's queue of async captures (rq:queue:render)
SYNC_QUEUE_KEY = f"queue:{QUEUE_NAME}:waiting"  # captures a client waits for: JobRequest JSON, popped first
WEBHOOK_QUEUE = "webhooks"  # RQ's queue of webhook deliveries
# The RQ job functions, by dotted path: the API enqueues them without importing the worker's code.
ASYNC_JOB_FUNCTION = "render.worker.jobs.capture_async"
DELIVER_FUNCTION = "service.webhooks.deliver"  # run by `screenshot-service webhooks`, the API's own process kind


def lanes(region: str | None) -> tuple[str, str]:
    """The waiting lane (a Redis list) and the RQ queue's name for jobs of `servers_region` `region`;
    None: the common ones, which every worker serves."""
    if not region:
        return SYNC_QUEUE_KEY, QUEUE_NAME
    return f"queue:{QUEUE_NAME}@{region}:waiting", f"{QUEUE_NAME}@{region}"


def reply_channel() -> str:
    """A new channel a waiting API listens on for its job's reference."""
    return f"results:{uuid.uuid4().hex}"


# --- jobs ----------------------------------------------------------------------------------------
OFFERED_KEY = "jobs:async:offered"  # async jobs in their queue, not yet claimed by a worker: reference -> queue key
IN_FLIGHT_KEY = "jobs:async:in-flight"  # references of async jobs a worker is rendering


def job_key(reference: str) -> str:
    """Hash of a job's state for GET /jobs/{reference}: organisation, status, error, storage_key."""
    return f"job:{reference}"


def result_key(reference: str) -> str:
    """Hash holding a finished job's result."""
    return f"result:{reference}"


def sweep_lock_key(reference: str) -> str:
    """Held by the API finishing an orphaned async job, so that one API does it."""
    return f"sweep:{reference}"


def reoffer_lock_key(reference: str) -> str:
    """Held by the API putting an unclaimed async job back in its queue."""
    return f"reoffer:{reference}"


# --- workers -------------------------------------------------------------------------------------
WORKERS_SEEN_KEY = "workers:seen"  # worker name -> its last heartbeat (every second)
WORKERS_BUSY_KEY = "workers:busy"  # worker name -> its last heartbeat while rendering a job
COUNTERS_KEY = "metrics:counters"  # counts kept by workers and deliverers, exported by every API's /metrics


def alive_key(worker: str) -> str:
    """Exists while the worker `worker` is alive (its heartbeat)."""
    return f"alive:{worker}"


# --- organisations, quota and concurrency -------------------------------------------------------
ORGS_KEY = "orgs"
URL_SECRET_KEY = "config:url_signing_secret"  # the generated secret of local storage links


def org_key(org_id: str) -> str:
    return f"org:{org_id}"


def access_key_key(access_key_hash: str) -> str:
    """An access key's entry, by the key's SHA-256 (never the key itself)."""
    return f"accesskey:{access_key_hash}"


def slots_key(org_id: str) -> str:
    """Concurrency slots held by an organisation's jobs, scored by when each expires."""
    return f"slots:{org_id}"


def usage_key(org_id: str, now: float) -> str:
    """An organisation's count of successful captures in the calendar month (UTC) of `now`."""
    return f"usage:{org_id}:{datetime.fromtimestamp(now, UTC):%Y-%m}"


# --- cache ---------------------------------------------------------------------------------------
def cache_record_key(digest: str) -> str:
    return f"cache:{digest}"


def cache_lock_key(digest: str) -> str:
    """Held while one request renders what others with the same key wait for (single flight)."""
    return f"cache-lock:{digest}"
