"""Third-party chatter stays out of the service's log (render.logs.QUIET_LOGGERS)."""

from __future__ import annotations

import logging

import pyvips

from render.logs import configure
from render.output import imaging


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def tile_lines() -> list[str]:
    kept = Kept()
    logging.getLogger().addHandler(kept)
    try:
        imaging.encode(pyvips.Image.black(1200, 1200, bands=3) + 90, imaging.EncodeOptions("jp2", 80))
    finally:
        logging.getLogger().removeHandler(kept)
    return [record.getMessage() for record in kept.records if "tile number" in record.getMessage()]


def test_libvips_tile_chatter_is_not_logged_at_info() -> None:
    configure("INFO", "json")
    try:
        assert tile_lines() == []
        logging.getLogger("pyvips").setLevel(logging.NOTSET)  # as before: libvips reports every tile
        assert tile_lines()
    finally:
        logging.getLogger().handlers.clear()
        logging.getLogger().setLevel(logging.WARNING)
