"""State shared by the request handlers of one API process."""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio as aioredis

from render.net.policy import NetworkPolicy
from service.api.cache import Cache
from service.api.dispatch import Dispatcher
from service.api.job_records import JobRecords
from service.api.metrics import Metrics
from service.organisations import OrganisationStore
from service.quota import QuotaKeeper
from service.results import Links
from service.settings import Settings
from storage import Storage


@dataclass
class AppContext:
    """What request handlers share; built in the app's lifespan."""

    settings: Settings
    redis: aioredis.Redis
    organisations: OrganisationStore
    quota: QuotaKeeper
    dispatcher: Dispatcher
    storage: Storage
    url_secret: bytes
    metrics: Metrics
    links: Links
    cache: Cache
    records: JobRecords
    policy: NetworkPolicy  # for webhook_url when a request comes in
