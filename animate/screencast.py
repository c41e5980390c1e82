"""The frames Chromium pushes as it draws them (CDP's Page.startScreencast), for a scroll recording.

Each pushed frame says which scroll offset it shows, so the frame of an offset is taken as it comes rather
than asked for: Page.captureScreenshot waits for a frame of its own, which is slower. A frame that does not
come in time, or comes at another size, is captured by the caller.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from typing import Any

import pyvips

from render.browser.tabs import Tab

FRAME_WAIT_SECONDS = 0.5  # for the frame of an offset; the caller then captures it itself


class Screencast:
    """Chromium's frames of `tab` as it draws them, newest kept, at the size of the recording's frames."""

    def __init__(self, tab: Tab, fmt: str, quality: int, size: tuple[int, int]) -> None:
        self._tab = tab
        self._size = size
        self._params = {"format": fmt, "quality": quality, "maxWidth": size[0], "maxHeight": size[1],
                        "everyNthFrame": 1}
        self._latest: tuple[float, str] | None = None  # scroll offset shown, the frame's base64
        self.count = 0  # frames pushed so far
        self._arrived = asyncio.Event()
        self._acks: set[asyncio.Future[Any]] = set()

    async def __aenter__(self) -> Screencast:
        self._tab.cdp.on("Page.screencastFrame", self._pushed)
        await self._tab.send("Page.startScreencast", self._params)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._tab.cdp.remove_listener("Page.screencastFrame", self._pushed)
        with contextlib.suppress(Exception):  # the page may be gone with a failed job
            await self._tab.send("Page.stopScreencast")

    async def restart(self) -> None:
        """After a navigation: a new document may not go on being cast."""
        with contextlib.suppress(Exception):
            await self._tab.send("Page.stopScreencast")
        self._latest = None
        await self._tab.send("Page.startScreencast", self._params)

    def _pushed(self, event: dict[str, Any]) -> None:
        # Acknowledged at once: Chromium sends the next frame only then.
        ack = asyncio.ensure_future(self._tab.send("Page.screencastFrameAck", {"sessionId": event["sessionId"]}))
        self._acks.add(ack)
        ack.add_done_callback(self._done_ack)
        self._latest = (float(event["metadata"].get("scrollOffsetY", -1.0)), event["data"])
        self.count += 1
        self._arrived.set()

    def _done_ack(self, ack: asyncio.Future[Any]) -> None:
        self._acks.discard(ack)
        if not ack.cancelled():
            ack.exception()  # retrieved: a page closing meanwhile is no error of the recording

    async def frame_showing(self, offset: float, since: int, *, moved: bool) -> bytes | None:
        """The newest frame showing scroll offset `offset`: one pushed after frame number `since` when the page
        `moved` since then (else the newest, which already shows it). None when none comes within
        FRAME_WAIT_SECONDS or it is not at the recording's size."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FRAME_WAIT_SECONDS
        while True:
            latest = self._latest
            if latest is not None and latest[0] == offset and (self.count > since or not moved):
                frame = base64.b64decode(latest[1])
                image = pyvips.Image.new_from_buffer(frame, "")
                return frame if (image.width, image.height) == self._size else None
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            self._arrived.clear()  # no frame can come in between: both run on this loop
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                return None
