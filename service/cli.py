"""The `screenshot-service` command: run, api, worker, webhooks, keys, take, healthcheck."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import redis.asyncio as aioredis

from service.settings import Settings, SettingsError, load_settings

T = TypeVar("T")


def _settings() -> Settings:
    try:
        return load_settings()
    except SettingsError as error:
        for line in str(error).splitlines():
            print(f"error: {line}", file=sys.stderr)
        raise SystemExit(2) from None


def _configure_logging(settings: Settings) -> None:
    from render.logs import configure

    configure(settings.service.log_level, settings.service.log_format)


def cmd_run(args: argparse.Namespace) -> int:
    from service.embedded import run

    return run(_settings())


def cmd_api(args: argparse.Namespace) -> int:
    import uvicorn

    from service.app import create_app

    settings = _settings()
    if not settings.service.redis_url:
        raise SystemExit("error: `api` needs SCREENSHOT_REDIS_URL (or use `screenshot-service run`)")
    _configure_logging(settings)
    uvicorn.run(create_app(settings), host=settings.service.host, port=settings.service.port,
                log_level="warning", access_log=False, loop="uvloop", http="httptools",
                timeout_graceful_shutdown=int(settings.service.result_wait_grace) + 90)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from render.worker import run_worker

    settings = _settings()
    if not settings.service.redis_url:
        raise SystemExit("error: `worker` needs SCREENSHOT_REDIS_URL (or use `screenshot-service run`)")
    _configure_logging(settings)
    from animate.options import AnimateOptions
    from animate.recorder import record

    run_worker(settings.service.redis_url, settings.render, settings.storage, burst=args.burst,
               kinds={AnimateOptions.job_kind: (AnimateOptions, record)})
    return 0


def cmd_webhooks(args: argparse.Namespace) -> int:
    from service.webhooks import run_deliverer

    settings = _settings()
    if not settings.service.redis_url:
        raise SystemExit("error: `webhooks` needs SCREENSHOT_REDIS_URL (or use `screenshot-service run`)")
    _configure_logging(settings)
    run_deliverer(settings, burst=args.burst)
    return 0


def cmd_healthcheck(args: argparse.Namespace) -> int:
    from service.health import check, running_role

    role = args.role or running_role()
    if role is None:
        print("unhealthy: no screenshot-service process (run, api, worker or webhooks) found", file=sys.stderr)
        return 1
    problem = check(_settings(), role)
    if problem:
        print(f"unhealthy ({role}): {problem}", file=sys.stderr)
        return 1
    print(f"healthy ({role})")
    return 0


def _with_store(settings: Settings, action: Callable[[Any], Awaitable[T]]) -> T:
    """Run `action(store)` against the configured Redis, or the data dir's embedded one (started
    for the command when the service is not running)."""
    from service.embedded import EmbeddedRedis
    from service.organisations import OrganisationStore

    embedded = None
    url = settings.service.redis_url
    if not url:
        embedded = EmbeddedRedis(settings.service.data_dir)
        if embedded.running():
            url, embedded = embedded.url, None
        else:
            url = embedded.start()

    async def go() -> T:
        connection = aioredis.Redis.from_url(url)
        try:
            return await action(OrganisationStore(connection))
        finally:
            await connection.aclose()

    try:
        return asyncio.run(go())
    finally:
        if embedded is not None:
            embedded.stop()


def cmd_keys(args: argparse.Namespace) -> int:
    settings = _settings()
    if args.keys_command == "create":
        created = _with_store(settings, lambda store: store.create(
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
        orgs = _with_store(settings, lambda store: store.list())
        print(f"{'organisation':<18} {'name':<16} {'key':<8} {'quota':>8} {'conc':>5} {'signed':<8} state")
        for org in orgs:
            print(f"{org.id:<18} {org.name[:16]:<16} {org.key_hint + '...':<8} {org.quota:>8} "
                  f"{org.concurrency:>5} {'required' if org.require_signature else 'optional':<8} "
                  f"{'revoked' if org.revoked else 'active'}")
        return 0
    if args.keys_command == "show":
        org = _with_store(settings, lambda store: store.find(args.key))
        if org is None:
            print(f"error: no organisation has the key or id {args.key!r}", file=sys.stderr)
            return 1
        print(f"organisation: {org.id} ({org.name}){' (revoked)' if org.revoked else ''}")
        print(f"signing key:  {org.signing_key}")
        print(f"quota:        {org.quota} per month, concurrency {org.concurrency}, "
              f"signatures {'required' if org.require_signature else 'optional'}")
        return 0
    revoked = _with_store(settings, lambda store: store.revoke(args.key))
    if revoked is None:
        print(f"error: no organisation has the key or id {args.key!r}", file=sys.stderr)
        return 1
    print(f"revoked organisation {revoked.id} ({revoked.name})")
    return 0


def _take_params(pairs: list[str]) -> dict[str, Any]:
    """`--viewport-width 800 --full-page true --hide-selectors .a --hide-selectors .b` to parameters."""
    from render.options import TakeOptions
    from service.params import list_fields

    arrays = list_fields(TakeOptions)
    params: dict[str, Any] = {}
    if len(pairs) % 2:
        raise SystemExit(f"error: parameter {pairs[-1]} needs a value (--name value)")
    for flag, value in zip(pairs[::2], pairs[1::2], strict=True):
        if not flag.startswith("--"):
            raise SystemExit(f"error: expected --parameter, got {flag!r}")
        name = flag[2:].replace("-", "_")
        if name in arrays:
            params.setdefault(name, []).append(value)
        else:
            params[name] = value
    return params


def cmd_take(args: argparse.Namespace, extra: list[str]) -> int:
    from render.errors import ServiceError
    from render.oneshot import take_once
    from render.options import parse_take_options

    settings = _settings()
    params = _take_params(extra)
    source = args.source
    if Path(source).is_file() and source.endswith((".md", ".markdown")):
        params["markdown"] = Path(source).read_text()
    elif Path(source).is_file() and source.endswith((".html", ".htm")):
        params["html"] = Path(source).read_text()
    else:
        params["url"] = source
    output_path = Path(args.output)
    if "format" not in params and output_path.suffix:
        params["format"] = output_path.suffix[1:].lower()
    started = time.monotonic()
    try:
        options = parse_take_options(params)
        print(f"Capturing {options.url or 'the document'} ...", file=sys.stderr, flush=True)
        output = asyncio.run(take_once(options, settings.render))
    except ServiceError as error:
        print(f"error: {error.code}: {error.message}", file=sys.stderr)
        return 1
    output_path.write_bytes(output.body)
    size = f"{output.width}x{output.height} " if output.width else ""
    print(f"Saved {output_path} ({size}{output.format}, {len(output.body)} bytes) in "
          f"{time.monotonic() - started:.2f} s", file=sys.stderr)
    return 0


def cmd_sign(args: argparse.Namespace, extra: list[str]) -> int:
    """Print a signed GET link: the canonical parameters (access_key included) and their signature."""
    from service.settings import ServiceSettings
    from service.signatures import canonical_message, sign

    pairs = [("access_key", args.key)]
    for item in extra:
        name, separator, value = item.partition("=")
        if not separator or not name:
            print(f"error: {item!r} is not name=value (repeat a name for each element of an array)", file=sys.stderr)
            return 2
        pairs.append((name, value))
    message = canonical_message(pairs)
    base = (args.base_url or ServiceSettings().base_url).rstrip("/")
    print(f"{base}/v1/screenshot/{args.endpoint}?{message}&signature={sign(message, args.signing_key)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="screenshot-service", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("run", help="the whole service on this machine (private Redis, API, workers)")
    commands.add_parser("api", help="the HTTP API only (needs SCREENSHOT_REDIS_URL)")
    worker = commands.add_parser("worker", help="one render worker (needs SCREENSHOT_REDIS_URL)")
    worker.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    webhooks = commands.add_parser("webhooks", help="the webhook deliverer, with the retry scheduler (needs "
                                   "SCREENSHOT_REDIS_URL)")
    webhooks.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    health = commands.add_parser("healthcheck", help="exit 0 when this machine's screenshot-service process is "
                                 "healthy (the image's HEALTHCHECK)")
    health.add_argument("--role", choices=["api", "worker", "webhooks", "run"],
                        help="which role to check (default: the one found running)")
    keys = commands.add_parser("keys", help="manage organisations and their keys")
    keys_commands = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_commands.add_parser("create", help="a new organisation with fresh keys")
    create.add_argument("--name", default="default")
    create.add_argument("--quota", type=int, help="screenshots per month (SCREENSHOT_DEFAULT_QUOTA)")
    create.add_argument("--concurrency", type=int, help="parallel requests (SCREENSHOT_DEFAULT_CONCURRENCY)")
    create.add_argument("--require-signature", action="store_true", help="refuse unsigned requests")
    create.add_argument("--access-key", help="use this access key instead of a generated one")
    create.add_argument("--signing-key", help="use this signing key instead of a generated one")
    keys_commands.add_parser("list", help="all organisations")
    show = keys_commands.add_parser(
        "show", help="an organisation's signing key and settings, by access key or organisation id (the "
        "access key itself is stored only as a hash)")
    show.add_argument("key")
    revoke = keys_commands.add_parser("revoke", help="revoke an access key (or a whole organisation by id)")
    revoke.add_argument("key")
    take = commands.add_parser(
        "take", help="one capture in this process, no Redis: take URL -o FILE [--param value ...]")
    take.add_argument("source", help="URL, or a .html / .md file")
    take.add_argument("-o", "--output", required=True, help="output file; its extension sets the format")
    signer = commands.add_parser(
        "sign", help="print a signed link: sign --key KEY --signing-key SECRET name=value [name=value ...]",
        description="Print a signed GET link to /take (or /animate). Parameters are name=value; repeat a name "
        "for each element of an array (hide_selectors=.a hide_selectors=.b). The README's Signed requests "
        "section gives the rules, for signing in other languages.")
    signer.add_argument("--key", required=True, help="the organisation's access key (part of the link)")
    signer.add_argument("--signing-key", required=True, help="the organisation's signing key (never in the link)")
    signer.add_argument("--endpoint", choices=["take", "animate"], default="take")
    signer.add_argument("--base-url", help="how clients reach the service (default: SCREENSHOT_PUBLIC_BASE_URL, "
                        "else http://SCREENSHOT_HOST:SCREENSHOT_PORT)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in ("take", "sign"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "take":
        sys.exit(cmd_take(args, extra))
    if args.command == "sign":
        sys.exit(cmd_sign(args, extra))
    handlers = {"run": cmd_run, "api": cmd_api, "worker": cmd_worker, "webhooks": cmd_webhooks,
                "keys": cmd_keys, "healthcheck": cmd_healthcheck}
    sys.exit(handlers[args.command](args))


if __name__ == "__main__":
    main()
