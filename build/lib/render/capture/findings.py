"""What a capture tells besides its output: the `metadata_*` facts, the page's content, its console, its
accessibility tree, its quality flags and its HAR, read from the page right after the output (so nothing done
here can show in it)."""

from __future__ import annotations

import asyncio
from typing import Any

from playwright.async_api import Response

from render.browser.tabs import Tab
from render.contract.formats import FORMATS, IMAGE_FORMATS
from render.contract.options import TakeOptions
from render.output import imaging, metadata
from render.output.accessibility import aria_snapshot
from render.page import quality
from render.page.har import HarRecorder
from render.page.watch import PageWatch
from render.settings import SERVICE_VERSION

Artefacts = dict[str, tuple[bytes, str, str]]  # name -> body, extension, content type (stored beside the result)


def wanted(options: TakeOptions) -> bool:
    """Whether the options ask for anything here."""
    return (metadata.wanted(options) or options.metadata_content or options.metadata_console
            or options.metadata_accessibility or options.metadata_quality or options.har)


async def collect(options: TakeOptions, tab: Tab, chrome_version: str, body: bytes, response: Response | None,
                  watch: PageWatch | None, har: HarRecorder | None, pending: list[str]
                  ) -> tuple[dict[str, Any], Artefacts]:
    """The JSON body's metadata fields, and the artefacts stored beside the result, of an output `body`."""
    found: dict[str, Any] = await metadata.collect(tab, options, response) if metadata.wanted(options) else {}
    artefacts: Artefacts = {}
    if options.metadata_content:
        artefacts["content"] = await metadata.content(tab, options)
    if options.metadata_console and watch is not None:
        found["console"] = watch.report()
    if options.metadata_accessibility:
        snapshot = await aria_snapshot(tab, options)
        found["accessibility"] = snapshot
        aria = FORMATS["aria"]
        artefacts["accessibility"] = (snapshot.encode(), aria.extension, aria.media_type)
    if options.metadata_quality:
        found["quality"] = await quality_of(options, tab, body, response, pending)
    if har is not None:
        artefacts["har"] = (await har.har(chrome_version, SERVICE_VERSION), "har", "application/json")
    return found, artefacts


async def quality_of(options: TakeOptions, tab: Tab, body: bytes, response: Response | None, pending: list[str]
                     ) -> dict[str, Any]:
    """metadata.quality: the page's flags, and for an image whether its pixels show anything."""
    image = options.format in IMAGE_FORMATS
    flags = await quality.page_flags(tab, response, pending, look_for_blank=not image)
    if image:
        colour = await asyncio.to_thread(imaging.uniform_colour, body)
        if colour is not None:
            flags["blank"] = {"reason": "the image is (nearly) one colour", "colour": list(colour)}
    return quality.report(flags)
