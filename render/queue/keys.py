"""Every Redis key, channel and queue name the service uses, in one place (the API, workers and deliverers
all read them from here; `redis-cli --scan` output can be matched against this list).

| key | type | written by | lifetime |
|---|---|---|---|
| `orgs` | set | `keys create` | forever |
| `org:<id>` | hash | `keys create/revoke` | forever |
| `accesskey:<sha256>` | string | `keys create` | until revoked |
| `config:url_signing_secret` | string | the first API | forever |
| `config:certify_key` | string | the first API or worker to need it | forever |
| `slots:<org>` | sorted set | quota hold/settle | entries expire by score |
| `usage:<org>:<YYYY-MM>` | counter | quota settle | 400 days |
| `queue:render[@region]:jobs:<class>:<org>` | stream, group `workers` | offer; workers (take, done) | until empty |
| `...:jobs:ready:<class>` | sorted set | offer, take | while the org has jobs waiting |
| `...:jobs:waiting[:<class>]` | hash | offer, take | while jobs wait |
| `...:jobs:backlog` | list (a token a waiting job) | offer, take | while jobs wait |
| `...:jobs:clock:<class>`, `...:jobs:served:<class>`, `...:jobs:turn` | string, hash, counter | take | forever |
| `...:jobs:bell` | list | offer (a token), idle workers (pop) | 64 tokens at most |
| `...:jobs:noisy` | set | offer (refused for its share), the API's sweeper | while over its share |
| `...:jobs:interactive-seen`, `...:jobs:quick-seen` | string | offer | 10 s |
| `...:jobs:running:<batch or heavy>` | counter | take; done, take back | forever |
| `queue:render[@region]:jobs` | stream, group `workers` | before the fair hand-off: read, swept | until served |
| `queue:render:holding:<worker>`, `queue:render:consumers` | set | take, done, sweeper | while held |
| `metrics:queue-wait:<class>` | hash | take (a histogram of waits) | forever |
| `rq:queue:webhooks` | RQ | whoever finishes a job, deliverers | RQ's |
| `webhook-owed:<reference>` | string | whoever finishes a job | 7 days |
| `jobs:async:in-flight` | set | workers | until finished |
| `job:<reference>` | hash | API and workers | 7 days |
| `result:<reference>` | hash | workers | 5 minutes |
| `results:<uuid>` | channel | the waiting API | |
| `alive:<worker>` | string | workers | 3 seconds |
| `workers:seen`, `workers:busy` | hash | workers | heartbeat |
| `metrics:counters` | hash | workers, deliverers | forever |
| `cache:<digest>`, `cache-lock:<digest>` | string | the API | cache_ttl, seconds |
| `sweep:<reference>` | string | the API's sweepers | seconds |
| `monitor:<id>` | hash | the API (spec), deliverers (next run, the run under way), workers (last run) | until deleted |
| `monitors:<org>` | set | the API | forever |
| `monitor-runs:<id>` | list | workers | until deleted (keep_runs newest) |
| `monitor-fired:<id>:<due>` | string | deliverers | 7 days |
| `monitors:due` | sorted set | deliverers and the API (id by next run) | while scheduled |
| `rq:queue:monitors` | RQ | the API, deliverers | RQ's |
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

# --- queues --------------------------------------------------------------------------------------
QUEUE_NAME = "render"
LANE_KEY = f"queue:{QUEUE_NAME}:jobs"  # the common lane: a stream of capture jobs (render.queue.lanes)
LANE_GROUP = "workers"  # the consumer group of the workers on every stream of every lane
CONSUMERS_KEY = f"queue:{QUEUE_NAME}:consumers"  # the workers that hold (or held) an entry of a lane's streams
HOLDING_PREFIX = f"queue:{QUEUE_NAME}:holding:"  # + a worker's name: the streams it holds an entry of
WEBHOOK_QUEUE = "webhooks"  # RQ's queue of webhook deliveries
# The RQ job function, by dotted path: whoever finishes a job enqueues it without importing the deliverer's code.
DELIVER_FUNCTION = "render.queue.rq_jobs.deliver"  # run by `screenshot-service webhooks` (render.queue.rq_jobs)


def lane_key(region: str | None) -> str:
    """The lane of jobs of `servers_region` `region` (the prefix of its streams, render.queue.lane_scripts);
    None: the common one, which every worker serves."""
    return f"queue:{QUEUE_NAME}@{region}:jobs" if region else LANE_KEY


def reply_channel() -> str:
    """A new channel a waiting API listens on for its job's reference."""
    return f"results:{uuid.uuid4().hex}"


# --- jobs ----------------------------------------------------------------------------------------
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


def webhook_owed_key(reference: str) -> str:
    """Set once a job's webhook delivery is queued: a job finished twice (its worker lost, then found) owes one."""
    return f"webhook-owed:{reference}"


# --- workers -------------------------------------------------------------------------------------
WORKERS_SEEN_KEY = "workers:seen"  # worker name -> its last heartbeat (every second)
WORKERS_BUSY_KEY = "workers:busy"  # worker name -> its last heartbeat while rendering a job
COUNTERS_KEY = "metrics:counters"  # counts kept by workers and deliverers, exported by every API's /metrics
QUEUE_WAIT_PREFIX = "metrics:queue-wait:"  # + a class: the histogram of the waits of its jobs for a worker


def alive_key(worker: str) -> str:
    """Exists while the worker `worker` is alive (its heartbeat)."""
    return f"alive:{worker}"


# --- organisations, quota and concurrency -------------------------------------------------------
ORGS_KEY = "orgs"
URL_SECRET_KEY = "config:url_signing_secret"  # the generated secret of local storage links
CERTIFY_KEY = "config:certify_key"  # the generated Ed25519 key of certified captures (PKCS#8 PEM)
ARCHIVE_KEY = "config:archive_key"  # the generated ECDSA P-384 key that signs archive=true's WACZ (PKCS#8 PEM)


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


# --- monitors ------------------------------------------------------------------------------------
MONITOR_QUEUE = "monitors"  # RQ's queue of monitor runs, scheduled (Queue.enqueue_at) and served by deliverers
FIRE_FUNCTION = "render.queue.rq_jobs.fire"  # the RQ job function of a due run (render.queue.rq_jobs)
MONITORS_DUE_KEY = "monitors:due"  # monitor id -> its next run (UNIX seconds): the APIs' sweep finds stalled ones


def monitor_key(monitor_id: str) -> str:
    """Hash of a monitor: its spec, sealed secrets, revision, next run, the run under way, last run, failures in a
    row."""
    return f"monitor:{monitor_id}"


def monitors_key(org_id: str) -> str:
    """Set of an organisation's monitor ids."""
    return f"monitors:{org_id}"


def monitor_runs_key(monitor_id: str) -> str:
    """List of a monitor's runs, newest first, as JSON."""
    return f"monitor-runs:{monitor_id}"


def monitor_fired_key(monitor_id: str, due: int) -> str:
    """Set by the first deliverer to fire a run due at `due`: a run fired twice is started once."""
    return f"monitor-fired:{monitor_id}:{due}"


# --- cache ---------------------------------------------------------------------------------------
def cache_record_key(digest: str) -> str:
    return f"cache:{digest}"


def cache_lock_key(digest: str) -> str:
    """Held while one request renders what others with the same key wait for (single flight)."""
    return f"cache-lock:{digest}"
