"""What every command of the CLI shares: its settings (refused with the fix named), and how a sub-command and a
number argument are declared."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.settings import Settings


def settings_or_exit() -> Settings:
    """The settings, or exit 2 naming each setting that is wrong and what it takes (loaded only by the commands
    that need them: half a second of imports a client command need not pay)."""
    from render.queue.records import keep_job_records_for
    from service.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as error:
        for line in str(error).splitlines():
            print(f"error: {line}", file=sys.stderr)
        raise SystemExit(2) from None
    keep_job_records_for(settings.service.job_record_ttl)  # every role writes job records
    return settings


def configure_logging(settings: Settings) -> None:
    from render.logs import configure

    configure(settings.service.log_level, settings.service.log_format)


def part_settings(command: str) -> Settings:
    """Settings of one part of a deployment (`api`, `worker`, `webhooks`), which joins an existing Redis;
    logging configured."""
    settings = settings_or_exit()
    if not settings.service.redis_url:
        raise SystemExit(f"error: `{command}` needs SCREENSHOT_REDIS_URL (or use `screenshot-service run`)")
    configure_logging(settings)
    return settings


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number not below `minimum`."""
    def parse(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if number < minimum:
            raise argparse.ArgumentTypeError(f"{number} is less than {minimum}")
        return number
    return parse


def command(commands: Any, name: str, text: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A sub-command whose --help says what it does (help= alone shows only in the parent's list)."""
    return commands.add_parser(name, help=text, description=kwargs.pop("description", text[0].upper() + text[1:]
                                                                       + "."), **kwargs)


