"""`screenshot-service keys`: organisations and their keys, in the configured Redis or the data dir's private one."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from service.cli.common import at_least, settings_or_exit

if TYPE_CHECKING:
    from service.settings import Settings

T = TypeVar("T")


def add_keys_commands(commands: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    """The `keys` command and its sub-commands, among `commands`."""
    keys = command(commands, "keys", "manage organisations and their keys (in Redis: SCREENSHOT_REDIS_URL, or "
                   "the private Redis of `run` under SCREENSHOT_DATA_DIR)")
    keys_commands = keys.add_subparsers(dest="keys_command", required=True)
    create = command(keys_commands, "create", "a new organisation with fresh keys")
    create.add_argument("--name", default="default", help="a name to recognise it by (default: default)")
    create.add_argument("--quota", type=at_least(0), help="screenshots per month (default: SCREENSHOT_DEFAULT_QUOTA)")
    create.add_argument("--concurrency", type=at_least(1),
                        help="parallel requests (default: SCREENSHOT_DEFAULT_CONCURRENCY)")
    create.add_argument("--require-signature", action="store_true", help="refuse unsigned requests")
    create.add_argument("--access-key", help="use this access key instead of a generated one")
    create.add_argument("--signing-key", help="use this signing key instead of a generated one")
    command(keys_commands, "list", "every organisation: id, name, quota, concurrency (never their keys)")
    show = command(keys_commands, "show", "an organisation's signing key and settings, by access key or "
                   "organisation id (the access key itself is stored only as a hash)")
    show.add_argument("key", help="an access key or an organisation id")
    revoke = command(keys_commands, "revoke", "revoke an access key (or a whole organisation by id)")
    revoke.add_argument("key", help="an access key or an organisation id")


def with_store(settings: Settings, action: Callable[[Any], Awaitable[T]]) -> T:
    """Run `action(store)` against the configured Redis, or the data dir's embedded one (started
    for the command when the service is not running)."""
    from render.queue.redis_client import RedisTarget, aclose
    from service.embedded_redis import EmbeddedRedis
    from service.organisations import OrganisationStore

    embedded = None
    if settings.service.redis_url:
        target = settings.service.redis()
    else:
        embedded = EmbeddedRedis(settings.service.data_dir)
        if embedded.running():
            target, embedded = RedisTarget(embedded.url), None
        else:
            target = RedisTarget(embedded.start())

    async def go() -> T:
        connection = target.asyncio()
        try:
            return await action(OrganisationStore(connection))
        finally:
            await aclose(connection)

    try:
        return asyncio.run(go())
    finally:
        if embedded is not None:
            embedded.stop()


def cmd_keys(args: argparse.Namespace) -> int:
    settings = settings_or_exit()
    if args.keys_command == "create":
        created = with_store(settings, lambda store: store.create(
            args.name, quota=args.quota if args.quota is not None else settings.service.default_quota,
            concurrency=args.concurrency if args.concurrency is not None
            else settings.service.default_concurrency,
            require_signature=args.require_signature, access_key=args.access_key,
            signing_key=args.signing_key))
        org = created.organisation
        print(f"organisation: {org.id} ({org.name})")
        print(f"access key:   {created.access_key}")
        print(f"signing key:  {org.signing_key}")
        print(f"quota:        {org.quota} per month, concurrency {org.concurrency}, "
              f"signatures {'required' if org.require_signature else 'optional'}")
        print("The access key is stored only as a hash: keep it now.")
        return 0
    if args.keys_command == "list":
        orgs = with_store(settings, lambda store: store.list())
        print(f"{'organisation':<18} {'name':<16} {'key':<8} {'quota':>8} {'conc':>5} {'signed':<8} state")
        for org in orgs:
            print(f"{org.id:<18} {org.name[:16]:<16} {org.key_hint + '...':<8} {org.quota:>8} "
                  f"{org.concurrency:>5} {'required' if org.require_signature else 'optional':<8} "
                  f"{'revoked' if org.revoked else 'active'}")
        return 0
    if args.keys_command == "show":
        org = with_store(settings, lambda store: store.find(args.key))
        if org is None:
            print(f"error: no organisation has the key or id {args.key!r}", file=sys.stderr)
            return 1
        print(f"organisation: {org.id} ({org.name}){' (revoked)' if org.revoked else ''}")
        print(f"signing key:  {org.signing_key}")
        print(f"quota:        {org.quota} per month, concurrency {org.concurrency}, "
              f"signatures {'required' if org.require_signature else 'optional'}")
        return 0
    revoked = with_store(settings, lambda store: store.revoke(args.key))
    if revoked is None:
        print(f"error: no organisation has the key or id {args.key!r}", file=sys.stderr)
        return 1
    print(f"revoked organisation {revoked.id} ({revoked.name})")
    return 0


