"""`screenshot-service take`: one capture in this process, without Redis or the API."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from service.cli.common import settings_or_exit

DOCUMENT_SUFFIXES = {".html": "html", ".htm": "html", ".md": "markdown", ".markdown": "markdown"}


def add_take_command(commands: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    """The `take` command, every /take parameter an option."""
    from render.contract.options import TakeOptions
    from service.cli.options import add_model_options

    take = command(commands, "take", "one capture in this process, no Redis: take SOURCE -o FILE [--parameter "
                   "value ...]", allow_abbrev=False, description="One capture in this process, without Redis or "
                   "the API: every /take parameter is an option below (booleans may stand alone: --full-page).")
    take.add_argument("source", help="a URL, or a .html / .md file")
    take.add_argument("-o", "--output", required=True, help="output file; its extension sets the format unless "
                      "--format is given")
    add_model_options(take, TakeOptions, "capture")


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
    from service.cli.options import chosen

    settings = settings_or_exit()
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
        if options.recorded and not settings.render.archive_key_file:
            print(f"error: {'format wacz' if options.format == 'wacz' else 'archive'} needs "
                  "SCREENSHOT_ARCHIVE_KEY_FILE from the command line (no Redis to keep a key "
                  "in): openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384 -out archive.pem",
                  file=sys.stderr)
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


