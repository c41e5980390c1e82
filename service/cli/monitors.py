"""`screenshot-service monitors`: the organisation's monitors through a running API (/v1/monitors), from a terminal:
create, list, show, runs, pause, resume, delete."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import httpx

from service.api_answers import refusal

TIMEOUT_SECONDS = 30


def add_monitor_commands(commands: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    """The `monitors` command and its sub-commands, on the CLI's parser."""
    monitors = command(commands, "monitors", "watch pages for change through a running API: monitors create URL "
                       "--every SECONDS | --cron EXPR, list, show, runs, pause, resume, delete",
                       description="Manage the organisation's monitors through a running API (docs/using.md, Watching "
                       "pages): each captures a page on a schedule and tells its webhook when it changed.")
    monitors.add_argument("--api", help="the API's base URL (default: SCREENSHOT_PUBLIC_BASE_URL, else "
                          "http://SCREENSHOT_HOST:SCREENSHOT_PORT)")
    monitors.add_argument("--access-key", help="the organisation's access key (default: SCREENSHOT_ACCESS_KEY)")
    actions = monitors.add_subparsers(dest="monitors_command", required=True)
    create = command(actions, "create", "a new monitor of URL; its first run happens at once")
    create.add_argument("url", help="the page to watch")
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--every", type=int, metavar="SECONDS", help="run every SECONDS")
    when.add_argument("--cron", metavar="EXPR", help="run at a cron expression's times ('0 9 * * 1-5')")
    create.add_argument("--timezone", default="UTC", help="time zone of --cron (default: UTC)")
    create.add_argument("--webhook", help="URL told of each run that changed")
    create.add_argument("--name", help="a label")
    create.add_argument("--every-run", action="store_true", help="tell the webhook of every run, changed or not")
    create.add_argument("--change-threshold", type=float, default=0.0,
                        help="share (0-1) of pixels that must change for a run to count as changed (default 0)")
    create.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a /take parameter of each run (repeatable): --set full_page=true")
    command(actions, "list", "the organisation's monitors")
    for name, text in (("show", "a monitor as JSON"), ("pause", "pause a monitor"),
                       ("resume", "resume a paused monitor (its failures forgotten)"),
                       ("delete", "delete a monitor and its history")):
        command(actions, name, text).add_argument("id", help="the monitor's id (mon_...)")
    runs = command(actions, "runs", "a monitor's runs, newest first: due time, status, change, links")
    runs.add_argument("id", help="the monitor's id (mon_...)")
    runs.add_argument("--limit", type=int, default=20, help="how many (default 20)")


def _value(text: str) -> Any:
    """`--set` values as JSON when they read as JSON (true, 3, [..]), else as text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _line(monitor: dict[str, Any]) -> str:
    schedule = monitor["schedule"]
    every = (f"every {schedule['interval']} s" if schedule.get("interval") else
             f"cron '{schedule['cron']}' {schedule['timezone']}")
    state = f"paused ({monitor['paused_reason']})" if monitor["paused"] and monitor.get("paused_reason") else (
        "paused" if monitor["paused"] else f"next {monitor['next_run']}")
    last = monitor.get("last_run") or {}
    told = f", last run {last['status']} changed={last.get('changed')}" if last else ""
    return f"{monitor['id']}  {monitor.get('name') or '-'}  {monitor['request'].get('url')}  {every}  {state}{told}"


def cmd_monitors(args: argparse.Namespace, default_api: Callable[[], str]) -> int:
    key = args.access_key or os.environ.get("SCREENSHOT_ACCESS_KEY")
    if not key:
        print("error: give --access-key, or set SCREENSHOT_ACCESS_KEY (`screenshot-service keys create` makes one)",
              file=sys.stderr)
        return 2
    api = (args.api or default_api()).rstrip("/")
    try:
        with httpx.Client(base_url=api, headers={"x-access-key": key}, timeout=TIMEOUT_SECONDS) as http:
            return _run(http, args)
    except httpx.HTTPError as error:
        print(f"error: could not reach the API at {api} ({error}); is the service running (`screenshot-service "
              "run`)? Give its address with --api.", file=sys.stderr)
        return 2


def _answer(response: httpx.Response) -> dict[str, Any] | None:
    if response.status_code >= 400:
        print(f"error: {refusal(response)}", file=sys.stderr)
        return None
    return dict(response.json())


def _run(http: httpx.Client, args: argparse.Namespace) -> int:
    action = args.monitors_command
    if action == "create":
        spec: dict[str, Any] = {
            "request": {"url": args.url, **{name: _value(value) for name, _, value in
                                             (item.partition("=") for item in args.set)}},
            "schedule": {"interval": args.every} if args.every else {"cron": args.cron, "timezone": args.timezone},
            "only_on_change": not args.every_run, "change_threshold": args.change_threshold}
        spec.update({k: v for k, v in (("webhook_url", args.webhook), ("name", args.name)) if v is not None})
        created = _answer(http.post("/v1/monitors", json=spec))
        if created is None:
            return 1
        print(f"created {created['id']}; first run now, then {_line(created).split('  ')[3]}")
        return 0
    if action == "list":
        found = _answer(http.get("/v1/monitors"))
        if found is None:
            return 1
        for monitor in found["monitors"]:
            print(_line(monitor))
        if not found["monitors"]:
            print("no monitors yet: `screenshot-service monitors create URL --every 3600`")
        return 0
    if action == "runs":
        found = _answer(http.get(f"/v1/monitors/{args.id}/runs", params={"limit": args.limit}))
        if found is None:
            return 1
        for run in found["runs"]:
            change = run.get("change") or {}
            share = f" {change['changed_share'] * 100:.3f}% of pixels" if change else ""
            links = " ".join(f"{name}={run[name]['url']}" for name in ("screenshot", "diff") if run.get(name))
            print(f"{run['due']}  {run['status']}  changed={run.get('changed')}{share}  "
                  f"{run.get('error_code') or ''} {links}".rstrip())
        return 0
    if action in ("pause", "resume"):
        changed = _answer(http.patch(f"/v1/monitors/{args.id}", json={"paused": action == "pause"}))
        if changed is None:
            return 1
        print(_line(changed))
        return 0
    if action == "delete":
        return 0 if _answer(http.delete(f"/v1/monitors/{args.id}")) is not None else 1
    shown = _answer(http.get(f"/v1/monitors/{args.id}"))
    if shown is None:
        return 1
    print(json.dumps(shown, indent=2))
    return 0
