"""animate/screencast.py on a real Chromium: the frame it hands out for a scroll offset shows that offset, to the
pixel, whether the page moved there a moment ago or stayed (a scroll recording's frames are a function of the
offset: tests/integration/test_animate.py checks them through the video, where the codec blurs them to about
30 px).

The page paints its scroll offset into three fixed grey blocks on every scroll (four bits each, in steps of 16
levels: JPEG's error stays well inside one), so each frame says where it was drawn; a frame drawn before the
scroll landed says so too."""

from __future__ import annotations

import asyncio

import pytest
import pyvips

from animate.recorder import _SCROLL_TO, FRAME_QUALITY
from animate.screencast import Screencast
from render.browser.pool import TabPool
from render.capture.screenshot import screenshot
from render.contract.devices import Viewport
from render.settings import RenderSettings

pytestmark = pytest.mark.browser
SIZE = (320, 240)
PAGE = """<!DOCTYPE html><html><body style="margin:0;height:4000px;background:#fff">
<div style="position:fixed;left:0;top:0;display:flex">
  <div class="nibble" style="width:64px;height:64px;background:#000"></div>
  <div class="nibble" style="width:64px;height:64px;background:#000"></div>
  <div class="nibble" style="width:64px;height:64px;background:#000"></div>
</div>
<script>
addEventListener('scroll', () => {
  const y = Math.round(scrollY);
  document.querySelectorAll('.nibble').forEach((block, i) => {
    const level = ((y >> (8 - 4 * i)) & 15) * 16;
    block.style.background = `rgb(${level}, ${level}, ${level})`;
  });
});
</script></body></html>"""


def offset_shown(frame: bytes) -> int:
    image = pyvips.Image.new_from_buffer(frame, "")
    nibbles = [round(image.getpoint(32 + 64 * i, 32)[0] / 16) for i in range(3)]
    return nibbles[0] * 256 + nibbles[1] * 16 + nibbles[2]


def test_each_frame_shows_the_offset_it_was_asked_for() -> None:
    async def main() -> None:
        pool = TabPool(RenderSettings())
        try:
            tab = await pool.acquire()
            await tab.cdp.send("Emulation.setDeviceMetricsOverride", Viewport(*SIZE).device_metrics())
            await tab.page.set_content(PAGE)
            first = await screenshot(tab, "jpeg", FRAME_QUALITY, fast=True, transparent=False)
            assert pyvips.Image.new_from_buffer(first, "").width == SIZE[0]
            shown, pushed = None, 0
            async with Screencast(tab, "jpeg", FRAME_QUALITY, SIZE) as cast:
                # Steps of one pixel, large jumps, a stay, the end of the page (clamped), and back.
                for wanted in (1, 2, 3, 40, 41, 700, 700, 700, 2345, 9000, 9000, 17, 0):
                    since = cast.count
                    at = float(await tab.run(_SCROLL_TO, wanted))
                    frame = await cast.frame_showing(at, since, moved=at != shown)
                    assert frame is not None, f"no frame pushed for offset {at}"
                    assert offset_shown(frame) == at, (wanted, at, offset_shown(frame))
                    if at != shown:
                        assert cast.count > since  # a frame drawn after the scroll, not an older one
                    shown = at
                pushed = cast.count
            assert shown == 0 and 0 < pushed
            # A frame of another size than the recording's is not handed out (the caller captures it).
            async with Screencast(tab, "jpeg", FRAME_QUALITY, (SIZE[0] * 2, SIZE[1] * 2)) as other:
                since = other.count
                at = float(await tab.run(_SCROLL_TO, 300))
                assert await other.frame_showing(at, since, moved=True) is None
        finally:
            await pool.close()

    asyncio.run(asyncio.wait_for(main(), 60))
