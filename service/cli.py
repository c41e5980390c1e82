"""The `screenshot-service` command: run, api, worker, webhooks, healthcheck, keys, take, sign, verify, mcp."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from service.settings import Settings, SettingsError, load_settings

T = TypeVar("T")
DOCUMENT_SUFFIXES = {".html": "html", ".htm": "html", ".md": "markdown", ".markdown": "markdown"}


def _settings() -> Settings:
    from render.queue.records import keep_job_records_for

    try:
        settings = load_settings()
    except SettingsError as error:
        for line in str(error).splitlines():
            print(f"error: {line}", file=sys.stderr)
        raise SystemExit(2) from None
    keep_job_records_for(settings.service.job_record_ttl)  # every role writes job records
    return settings


def _configure_logging(settings: Settings) -> None:
    from render.logs import configure

    configure(settings.service.log_level, settings.service.log_format)


def _part_settings(command: str) -> Settings:
    """Settings of one part of a deployment (`api`, `worker`, `webhooks`), which joins an existing Redis;
    logging configured."""
    settings = _settings()
    if not settings.service.redis_url:
        raise SystemExit(f"error: `{command}` needs SCREENSHOT_REDIS_URL (or use `screenshot-service run`)")
    _configure_logging(settings)
    return settings


def cmd_run(args: argparse.Namespace) -> int:
    from service.embedded import run

    return run(_settings())


def cmd_api(args: argparse.Namespace) -> int:
    import uvicorn

    from service.app import create_app

    settings = _part_settings("api")
    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again against the handler it found: a
    # clean stop is exit 0, not 143 (the orchestrator reads the code).
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(0))
    uvicorn.run(create_app(settings), host=settings.service.host, port=settings.service.port,
                log_level="warning", access_log=False, loop="uvloop", http="httptools",
                timeout_graceful_shutdown=int(settings.service.result_wait_grace) + 90)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from render.worker.main import run_worker

    settings = _part_settings("worker")
    from animate.options import AnimateOptions
    from animate.recorder import record

    run_worker(settings.service.redis(), settings.render, settings.storage, burst=args.burst,
               kinds={AnimateOptions.job_kind: (AnimateOptions, record)})
    return 0


def cmd_webhooks(args: argparse.Namespace) -> int:
    from service.webhooks import run_deliverer

    settings = _part_settings("webhooks")
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
    from render.queue.redis_client import RedisTarget, aclose
    from service.embedded import EmbeddedRedis
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


def _source(source: str) -> dict[str, str]:
    """The capture's source: a URL, or an .html / .md file (which must exist)."""
    path = Path(source)
    if "://" not in source and path.suffix.lower() in DOCUMENT_SUFFIXES:
        if not path.is_file():
            print(f"error: no such file: {source} (a .html or .md source is read from disk; give a URL with "
                  "its http:// or https://)", file=sys.stderr)
            raise SystemExit(2)
        return {DOCUMENT_SUFFIXES[path.suffix.lower()]: path.read_text()}
    return {"url": source}


def cmd_take(args: argparse.Namespace) -> int:
    from render.contract.errors import ServiceError
    from render.contract.options import TakeOptions, parse_take_options
    from render.worker.oneshot import take_once
    from service.cli_options import chosen

    settings = _settings()
    params: dict[str, Any] = {**chosen(args, TakeOptions), **_source(args.source)}
    output_path = Path(args.output)
    if not output_path.parent.is_dir():  # before the capture, not after it rendered
        print(f"error: the folder of --output does not exist: {output_path.parent} (create it first)",
              file=sys.stderr)
        return 2
    if "format" not in params and output_path.suffix:
        params["format"] = output_path.suffix[1:].lower()
    started = time.monotonic()
    try:
        options = parse_take_options(params)
        if options.certify:
            print("error: certify needs the service's key and storage: ask the API (`screenshot-service run`) "
                  "for a certified capture", file=sys.stderr)
            return 2
        print(f"Capturing {options.url or 'the document'} ...", file=sys.stderr, flush=True)
        output = asyncio.run(take_once(options, settings.render))
    except ServiceError as error:
        print(f"error: {error.code}: {error.message}", file=sys.stderr)
        return 1
    output_path.write_bytes(output.body)
    size = f"{output.width}x{output.height} " if output.width else ""
    print(f"Saved {output_path} ({size}{output.format}, {len(output.body)} bytes) in "
          f"{time.monotonic() - started:.2f} s", file=sys.stderr)
    for name, (body, extension, _) in output.artefacts.items():  # the HAR, the content, ... beside the output
        beside = output_path.with_name(f"{output_path.stem}.{name}.{extension}")
        beside.write_bytes(body)
        print(f"Saved {beside} ({name}, {len(body)} bytes)", file=sys.stderr)
    if output.metadata:  # what metadata_* found, as the JSON body's `metadata`
        print(json.dumps(output.metadata, indent=2, ensure_ascii=False))
    return 0


def cmd_sign(args: argparse.Namespace, extra: list[str]) -> int:
    """Print a signed GET link: the canonical parameters (access_key included) and their signature. The
    parameters are checked as the endpoint would check them first: a link that would be refused is not signed."""
    from animate.options import AnimateOptions, parse_animate_options
    from render.contract.errors import RequestNotValid
    from render.contract.options import TakeOptions, parse_take_options
    from service.params import list_fields
    from service.settings import ServiceSettings
    from service.signatures import canonical_message, sign

    model, parse = ((AnimateOptions, parse_animate_options) if args.endpoint == "animate"
                    else (TakeOptions, parse_take_options))
    arrays = list_fields(model)
    pairs = [("access_key", args.key)]
    values: dict[str, Any] = {}
    for item in extra:
        name, separator, value = item.partition("=")
        if not separator or not name:
            print(f"error: {item!r} is not name=value (repeat a name for each element of an array)", file=sys.stderr)
            return 2
        pairs.append((name, value))
        if name in arrays:
            values.setdefault(name, []).append(value)
        else:
            values[name] = value
    try:
        parse(values)
    except RequestNotValid as error:
        for detail in error.details:
            print(f"error: {detail.field}: {detail.message}", file=sys.stderr)
        print(f"error: not signed: /{args.endpoint} would refuse these parameters", file=sys.stderr)
        return 2
    message = canonical_message(pairs)
    base = (args.base_url or ServiceSettings().base_url).rstrip("/")
    print(f"{base}/v1/screenshot/{args.endpoint}?{message}&signature={sign(message, args.signing_key)}")
    return 0


def _at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if number < minimum:
            raise argparse.ArgumentTypeError(f"{number} is less than {minimum}")
        return number
    return parse


def _command(commands: Any, name: str, text: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A sub-command whose --help says what it does (help= alone shows only in the parent's list)."""
    return commands.add_parser(name, help=text, description=kwargs.pop("description", text[0].upper() + text[1:]
                                                                       + "."), **kwargs)


def build_parser() -> argparse.ArgumentParser:
    from render.contract.options import TakeOptions
    from service.cli_mcp import add_mcp_command
    from service.cli_monitors import add_monitor_commands
    from service.cli_options import add_model_options

    parser = argparse.ArgumentParser(prog="screenshot-service")
    commands = parser.add_subparsers(dest="command", required=True)
    _command(commands, "run", "the whole service on this machine (private Redis, API, workers, webhooks)",
             description="The whole service on this machine: a private Redis under SCREENSHOT_DATA_DIR, the API on "
             "SCREENSHOT_HOST:SCREENSHOT_PORT, SCREENSHOT_WORKERS render workers and the webhook deliverer. Prints "
             "the access key and a curl command to try; Ctrl-C stops everything. Settings: the README's table.")
    _command(commands, "api", "the HTTP API only (needs SCREENSHOT_REDIS_URL)")
    worker = _command(commands, "worker", "one render worker with its own Chromium (needs SCREENSHOT_REDIS_URL)",
                      description="One render worker: a warm Chromium serving capture jobs from Redis "
                      "(SCREENSHOT_REDIS_URL) until SIGTERM, finishing the job in hand first.")
    worker.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    webhooks = _command(commands, "webhooks", "the webhook deliverer, with the retry scheduler (needs "
                        "SCREENSHOT_REDIS_URL)")
    webhooks.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    health = _command(commands, "healthcheck", "exit 0 when this machine's screenshot-service process is healthy "
                      "(the image's HEALTHCHECK)")
    health.add_argument("--role", choices=["api", "worker", "webhooks", "run"],
                        help="which role to check (default: the one found running)")
    keys = _command(commands, "keys", "manage organisations and their keys (in Redis: SCREENSHOT_REDIS_URL, or "
                    "the private Redis of `run` under SCREENSHOT_DATA_DIR)")
    keys_commands = keys.add_subparsers(dest="keys_command", required=True)
    create = _command(keys_commands, "create", "a new organisation with fresh keys")
    create.add_argument("--name", default="default", help="a name to recognise it by (default: default)")
    create.add_argument("--quota", type=_at_least(0), help="screenshots per month (default: SCREENSHOT_DEFAULT_QUOTA)")
    create.add_argument("--concurrency", type=_at_least(1),
                        help="parallel requests (default: SCREENSHOT_DEFAULT_CONCURRENCY)")
    create.add_argument("--require-signature", action="store_true", help="refuse unsigned requests")
    create.add_argument("--access-key", help="use this access key instead of a generated one")
    create.add_argument("--signing-key", help="use this signing key instead of a generated one")
    _command(keys_commands, "list", "every organisation: id, name, quota, concurrency (never their keys)")
    show = _command(keys_commands, "show", "an organisation's signing key and settings, by access key or "
                    "organisation id (the access key itself is stored only as a hash)")
    show.add_argument("key", help="an access key or an organisation id")
    revoke = _command(keys_commands, "revoke", "revoke an access key (or a whole organisation by id)")
    revoke.add_argument("key", help="an access key or an organisation id")
    take = _command(commands, "take", "one capture in this process, no Redis: take SOURCE -o FILE [--parameter "
                    "value ...]", allow_abbrev=False, description="One capture in this process, without Redis or "
                    "the API: every /take parameter is an option below (booleans may stand alone: --full-page).")
    take.add_argument("source", help="a URL, or a .html / .md file")
    take.add_argument("-o", "--output", required=True, help="output file; its extension sets the format unless "
                      "--format is given")
    add_model_options(take, TakeOptions, "capture")
    signer = _command(
        commands, "sign", "print a signed link: sign --key KEY --signing-key SECRET name=value [name=value ...]",
        description="Print a signed GET link to /take (or /animate). Parameters are name=value; repeat a name "
        "for each element of an array (hide_selectors=.a hide_selectors=.b). They are checked as the endpoint "
        "checks them: a link it would refuse is not signed. The README's Signed requests section gives the "
        "rules, for signing in other languages.")
    signer.add_argument("--key", required=True, help="the organisation's access key (part of the link)")
    signer.add_argument("--signing-key", required=True, help="the organisation's signing key (never in the link)")
    signer.add_argument("--endpoint", choices=["take", "animate"], default="take")
    signer.add_argument("--base-url", help="how clients reach the service (default: SCREENSHOT_PUBLIC_BASE_URL, "
                        "else http://SCREENSHOT_HOST:SCREENSHOT_PORT)")
    signer.add_argument("parameters", nargs="*", metavar="name=value", help="a parameter of the link; repeat a "
                        "name for each element of an array")
    verify = _command(commands, "verify", "check a certify=true certificate and files of its capture, offline: "
                      "verify CERTIFICATE [FILE ...] [--public-key KEY]",
                      description="Check a certificate of certify=true offline: its Ed25519 signature over the "
                      "manifest, and that each FILE is one of the capture's artefacts byte for byte (by SHA-256). "
                      "Exits 0 when all holds, 1 naming what does not (a changed byte anywhere), 2 for input it "
                      "cannot read.")
    verify.add_argument("certificate", help="the certificate's JSON (certificate.url, x-service-certificate-url)")
    verify.add_argument("files", nargs="*", help="files returned by the capture: the output, its content, ...")
    verify.add_argument("--public-key", help="require this signer: base64 of the key, its PEM, or a file holding "
                        "either (GET /v1/screenshot/certify/public-key gives both)")
    add_monitor_commands(commands, _command)
    add_mcp_command(commands, _command, _at_least(1))
    # Every command, named where `--help` starts (from the commands themselves, so none is left out).
    parser.description = ("The screenshot-service command: " + ", ".join(commands.choices) + ". "
                          "`screenshot-service COMMAND --help` says what each takes.")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "sign":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "sign":  # name=value parameters may stand between the options too
        sys.exit(cmd_sign(args, [*args.parameters, *extra]))
    from service.cli_mcp import cmd_mcp
    from service.cli_monitors import cmd_monitors
    from service.verify import cmd_verify

    handlers = {"monitors": lambda args: cmd_monitors(args, _settings().service.base_url), "verify": cmd_verify,
                "mcp": lambda args: cmd_mcp(args, _settings().service.base_url),
                "run": cmd_run, "api": cmd_api, "worker": cmd_worker, "webhooks": cmd_webhooks,
                "keys": cmd_keys, "healthcheck": cmd_healthcheck, "take": cmd_take}
    sys.exit(handlers[args.command](args))


if __name__ == "__main__":
    main()
