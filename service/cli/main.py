"""The `screenshot-service` command: its parser, and the programs it starts (each imported only when started, so
a command loads nothing of the others): run (service.runner), api (service.api), worker (render.worker),
webhooks (service.deliverer), mcp (service.mcp); and the one-shot commands, one module each in this package."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from service.cli.common import at_least, command, part_settings, settings_or_exit


def cmd_run(args: argparse.Namespace) -> int:
    from service.runner.supervisor import run

    return run(settings_or_exit())


def cmd_api(args: argparse.Namespace) -> int:
    from service.api.server import serve

    serve(part_settings("api"))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from render.worker.main import run_worker

    settings = part_settings("worker")
    from animate.options import AnimateOptions
    from animate.recorder import record

    run_worker(settings.service.redis(), settings.render, settings.storage, burst=args.burst,
               kinds={AnimateOptions.job_kind: (AnimateOptions, record)})
    return 0


def cmd_webhooks(args: argparse.Namespace) -> int:
    from service.deliverer.main import run_deliverer

    settings = part_settings("webhooks")
    run_deliverer(settings, burst=args.burst)
    return 0


def cmd_healthcheck(args: argparse.Namespace) -> int:
    from service.cli.healthcheck import check, running_role

    role = args.role or running_role()
    if role is None:
        print("unhealthy: no screenshot-service process (run, api, worker or webhooks) found", file=sys.stderr)
        return 1
    problem = check(settings_or_exit(), role)
    if problem:
        print(f"unhealthy ({role}): {problem}", file=sys.stderr)
        return 1
    print(f"healthy ({role})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from service.cli.keys import add_keys_commands
    from service.cli.mcp import add_mcp_command
    from service.cli.monitors import add_monitor_commands
    from service.cli.sign import add_sign_command
    from service.cli.take import add_take_command
    from service.cli.verify import add_verify_command

    parser = argparse.ArgumentParser(prog="screenshot-service")
    commands = parser.add_subparsers(dest="command", required=True)
    command(commands, "run", "the whole service on this machine (private Redis, API, workers, webhooks)",
            description="The whole service on this machine: a private Redis under SCREENSHOT_DATA_DIR, the API on "
            "SCREENSHOT_HOST:SCREENSHOT_PORT, SCREENSHOT_WORKERS render workers and the webhook deliverer. Prints "
            "the access key and a curl command to try; Ctrl-C stops everything. Settings: docs/settings.md.")
    command(commands, "api", "the HTTP API only (needs SCREENSHOT_REDIS_URL)")
    worker = command(commands, "worker", "one render worker with its own Chromium (needs SCREENSHOT_REDIS_URL)",
                     description="One render worker: a warm Chromium serving capture jobs from Redis "
                     "(SCREENSHOT_REDIS_URL) until SIGTERM, finishing the job in hand first.")
    worker.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    webhooks = command(commands, "webhooks", "the webhook deliverer, with the retry scheduler (needs "
                       "SCREENSHOT_REDIS_URL)")
    webhooks.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    health = command(commands, "healthcheck", "exit 0 when this machine's screenshot-service process is healthy "
                     "(the image's HEALTHCHECK)")
    health.add_argument("--role", choices=["api", "worker", "webhooks", "run"],
                        help="which role to check (default: the one found running)")
    add_keys_commands(commands, command)
    add_take_command(commands, command)
    add_sign_command(commands, command)
    add_verify_command(commands, command)
    add_monitor_commands(commands, command)
    add_mcp_command(commands, command, at_least(1))
    # Every command, named where `--help` starts (from the commands themselves, so none is left out).
    parser.description = ("The screenshot-service command: " + ", ".join(commands.choices) + ". "
                          "`screenshot-service COMMAND --help` says what each takes.")
    return parser


def _one_shot(name: str) -> Any:
    """`cmd_<name>` of `service.cli.<name>`, imported only when that command runs (a client command such as
    monitors need not load the settings' models: 0.35 s of its 1 s)."""
    return getattr(importlib.import_module(f"service.cli.{name}"), f"cmd_{name}")


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "sign":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "sign":  # name=value parameters may stand between the options too
        from service.cli.sign import cmd_sign

        sys.exit(cmd_sign(args, [*args.parameters, *extra]))

    def default_api() -> str:  # the settings' base URL, for a client command given no --api
        return settings_or_exit().service.base_url

    handlers = {"monitors": lambda args: _one_shot("monitors")(args, default_api),
                "mcp": lambda args: _one_shot("mcp")(args, default_api),
                "verify": lambda args: _one_shot("verify")(args), "keys": lambda args: _one_shot("keys")(args),
                "take": lambda args: _one_shot("take")(args),
                "run": cmd_run, "api": cmd_api, "worker": cmd_worker, "webhooks": cmd_webhooks,
                "healthcheck": cmd_healthcheck}
    sys.exit(handlers[args.command](args))


if __name__ == "__main__":
    main()
