"""archive=true in a capture: what its web archive is made of (the page's traffic, the page, its screenshots), made
as the output is produced, and the WACZ packed and signed from it by the worker that holds the archive key
(render/output/wacz.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from cryptography.hazmat.primitives.asymmetric import ec

from render.browser.tabs import Tab
from render.contract.archives import CERTIFICATE_PATH, Exchange
from render.contract.errors import ResultingImageTooLarge
from render.contract.formats import IMAGE_FORMATS
from render.contract.options import TakeOptions
from render.output import imaging, wacz
from render.page.archive import ArchiveRecorder
from render.page.recording import quietly
from render.settings import SERVICE_VERSION, RenderSettings


@dataclass(frozen=True)
class ArchiveMaterial:
    """What a capture's web archive is made of: the page's traffic, the page and its screenshots."""

    exchanges: list[Exchange]
    page: wacz.Page
    views: list[wacz.View]


async def material(options: TakeOptions, tab: Tab, recorder: ArchiveRecorder, body: bytes) -> ArchiveMaterial:
    """The traffic, the page and its screenshots (PNG: the viewport, and the whole page with full_page) for the web
    archive of an output `body`."""
    now = datetime.now(UTC)
    title = await quietly(tab.page.title(), "")
    url = tab.page.url
    views = []
    if options.format in IMAGE_FORMATS or options.format == "wacz":  # wacz: `body` is the page's PNG
        png = body if options.format in ("png", "wacz") else await asyncio.to_thread(imaging.to_png, body)
        if options.full_page:
            views.append(wacz.View("fullPage", url, png, now))
            viewport = options.viewport
            png = await asyncio.to_thread(imaging.top_png, png, round(viewport.width * viewport.scale),
                                          round(viewport.height * viewport.scale))
        views.insert(0, wacz.View("view", url, png, now))
    return ArchiveMaterial(await recorder.exchanges(), wacz.Page(url, title, now), views)


class Archived(Protocol):
    """An output with its archive material (render.capture.pipeline.Output)."""

    body: bytes
    format: str
    archive: ArchiveMaterial | None
    artefacts: dict[str, tuple[bytes, str, str]]
    metadata: dict[str, Any]


def pack_into(output: Archived, key: ec.EllipticCurvePrivateKey, settings: RenderSettings,
              certificate: bytes | None = None) -> None:
    """The output's archive material packed as a WACZ signed with `key` (with the capture's `certificate` as a file of
    its own): the output's body with format=wacz, else among its artefacts; how many bodies the size bound left out
    in its metadata."""
    if output.archive is None:
        return
    found = output.archive
    extras = {CERTIFICATE_PATH: (certificate, "certificate")} if certificate is not None else None
    packed = wacz.package(found.exchanges, found.page, found.views, key=key, max_bytes=settings.archive_max_bytes,
                          software=f"screenshot-service {SERVICE_VERSION}", extras=extras)
    if output.format == "wacz":
        if len(packed.data) > settings.max_result_bytes:
            raise ResultingImageTooLarge(
                f"The web archive is {len(packed.data)} bytes, over the limit of {settings.max_result_bytes} "
                "(setting SCREENSHOT_MAX_RESULT_BYTES; SCREENSHOT_ARCHIVE_MAX_BYTES bounds the bodies it keeps).")
        output.body = packed.data
    else:
        output.artefacts["archive"] = (packed.data, "wacz", wacz.MEDIA_TYPE)
    output.metadata["archive"] = {"truncated": packed.truncated}
