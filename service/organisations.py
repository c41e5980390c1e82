"""Organisations and their keys in Redis.

An access key is stored only as its SHA-256 (`accesskey:<hash>` -> organisation id); the signing
key must stay readable because the service computes HMACs with it.
"""

from __future__ import annotations

import hashlib
import secrets
import string
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import redis
import redis.asyncio as aioredis
from redis.typing import EncodableT, FieldT

from render.queue.keys import ORGS_KEY, access_key_key
from render.queue.keys import org_key as _org_key
from render.queue.redis_client import text
from render.queue.scripts import LuaScript

if TYPE_CHECKING:
    from service.settings import ServiceSettings


def _access_key_key(access_key: str) -> str:
    return access_key_key(hashlib.sha256(access_key.encode()).hexdigest())


KEY_ALPHABET = string.ascii_letters + string.digits


def new_key() -> str:
    """A fresh random key: 32 letters and digits (190 bits).

    Letters and digits only, so a key never starts with '-' (which a command line would read as an
    option) and never needs quoting or escaping in a shell, a URL or a header.
    """
    return "".join(secrets.choice(KEY_ALPHABET) for _ in range(32))


def signing_key_of(connection: redis.Redis, org_id: str) -> str | None:
    """An organisation's signing key, for synchronous callers (the webhook deliverer)."""
    value = connection.hget(_org_key(org_id), "signing_key")
    return text(value) if value else None


def organisation_by_id(connection: redis.Redis, org_id: str) -> Organisation | None:
    """An organisation by its id, for synchronous callers (deliverers firing monitor runs)."""
    return OrganisationStore._from_fields(org_id, connection.hgetall(_org_key(org_id)))


@dataclass(frozen=True)
class Organisation:
    """Who a request is for, and its limits."""

    id: str
    name: str
    quota: int
    concurrency: int
    signing_key: str | None
    require_signature: bool
    key_hint: str = ""
    revoked: bool = False


@dataclass(frozen=True)
class CreatedOrganisation:
    """A new organisation with its keys, shown once."""

    organisation: Organisation
    access_key: str


# The organisation's key is derived inside the script: one Redis server, not a cluster.
BY_ACCESS_KEY = LuaScript(
    "BY_ACCESS_KEY", keys=["an access key's entry"], args=["the organisation keys' prefix"],
    returns="{id, the organisation's fields and values, alternating}, or nil for an unknown key", body="""
local id = redis.call('GET', KEYS[1])
if not id then return nil end
return {id, redis.call('HGETALL', ARGV[1] .. id)}
""")


class OrganisationStore:
    """Create, find, list and revoke organisations."""

    def __init__(self, connection: aioredis.Redis) -> None:
        self._redis = connection
        self._by_access_key = BY_ACCESS_KEY.on(connection)

    async def create(
        self, name: str, *, quota: int, concurrency: int, require_signature: bool = False,
        access_key: str | None = None, signing_key: str | None = None,
    ) -> CreatedOrganisation:
        """A new organisation; keys are generated unless given."""
        access_key = access_key or new_key()
        signing_key = signing_key or new_key()
        org = Organisation(
            id=secrets.token_hex(8), name=name, quota=quota, concurrency=concurrency,
            signing_key=signing_key, require_signature=require_signature, key_hint=access_key[:4])
        created = await self._redis.set(_access_key_key(access_key), org.id, nx=True)
        if not created:
            raise ValueError("this access key is already in use")
        fields: dict[FieldT, EncodableT] = {
            "name": name, "quota": quota, "concurrency": concurrency, "signing_key": signing_key,
            "require_signature": int(require_signature), "key_hint": org.key_hint,
            "created_at": int(time.time()), "revoked": 0,
        }
        await self._redis.hset(_org_key(org.id), mapping=fields)
        await self._redis.sadd(ORGS_KEY, org.id)
        return CreatedOrganisation(org, access_key)

    async def ensure(
        self, name: str, access_key: str, *, signing_key: str | None, quota: int, concurrency: int,
        require_signature: bool,
    ) -> Organisation:
        """The organisation of this access key, created (or updated) to match the given settings."""
        org = await self.by_access_key(access_key)
        if org is None:
            return (await self.create(name, quota=quota, concurrency=concurrency, access_key=access_key,
                                      signing_key=signing_key,
                                      require_signature=require_signature)).organisation
        updates: dict[FieldT, EncodableT] = {"require_signature": int(require_signature)}
        if signing_key:
            updates["signing_key"] = signing_key
        await self._redis.hset(_org_key(org.id), mapping=updates)
        return await self.get(org.id)  # type: ignore[return-value]

    async def ensure_configured(self, service: ServiceSettings) -> Organisation | None:
        """The organisation of SCREENSHOT_ACCESS_KEY (named `default`) as its settings describe it, when the
        variable is set: the API makes sure of it at start, `run` before it prints the key."""
        if not service.access_key:
            return None
        return await self.ensure(
            "default", service.access_key, signing_key=service.signing_key, quota=service.default_quota,
            concurrency=service.default_concurrency, require_signature=service.require_signature)

    async def get(self, org_id: str) -> Organisation | None:
        return self._from_fields(org_id, await self._redis.hgetall(_org_key(org_id)))

    @staticmethod
    def _from_fields(org_id: str, data: Mapping[bytes | str, bytes | str]) -> Organisation | None:
        if not data:
            return None
        fields = {text(k): text(v) for k, v in data.items()}
        return Organisation(
            id=org_id, name=fields.get("name", ""), quota=int(fields.get("quota", 0)),
            concurrency=int(fields.get("concurrency", 1)), signing_key=fields.get("signing_key") or None,
            require_signature=fields.get("require_signature") == "1", key_hint=fields.get("key_hint", ""),
            revoked=fields.get("revoked") == "1")

    async def by_access_key(self, access_key: str) -> Organisation | None:
        """The active organisation owning this key, or None (one round trip: every request asks)."""
        found = await self._by_access_key(keys=[_access_key_key(access_key)], args=[_org_key("")])
        if not found:
            return None
        org_id, flat = text(found[0]), found[1]
        org = self._from_fields(org_id, dict(zip(flat[::2], flat[1::2], strict=True)))
        return None if org is None or org.revoked else org

    async def list(self) -> list[Organisation]:
        ids = sorted(text(member) for member in await self._redis.smembers(ORGS_KEY))
        orgs = [await self.get(org_id) for org_id in ids]
        return [org for org in orgs if org is not None]

    async def find(self, access_key_or_id: str) -> Organisation | None:
        """The organisation of an access key, or of an organisation id."""
        return await self.by_access_key(access_key_or_id) or await self.get(access_key_or_id)

    async def revoke(self, access_key_or_id: str) -> Organisation | None:
        """Revoke by access key or organisation id; the key stops working at once."""
        org = await self.find(access_key_or_id)
        if org is None:
            return None
        await self._redis.delete(_access_key_key(access_key_or_id))
        await self._redis.hset(_org_key(org.id), "revoked", 1)
        return org
