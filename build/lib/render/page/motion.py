"""`reduce_motion`: the page brought to a still state before it is captured (render/page/js/motion.js).

Finite animations and transitions end, looping ones stop at the start of their first iteration, video and
audio pause at their first frame, and the autoplay of the sliders the script knows (Swiper, Bootstrap,
Slick, Owl Carousel, Flickity) stops at the first slide. It runs in every frame just before the capture,
after the lazy-load scroll of a full-page capture and before each section of a `by_sections` one, and
implies `reduced_motion` (the page is also told its visitor prefers reduced motion). Best effort, as in
the hosted API: motion a script draws frame by frame, canvas and animated images are not reached.
"""

from __future__ import annotations

import logging
from pathlib import Path

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

LOG = logging.getLogger(__name__)
_STILL = (Path(__file__).parent / "js" / "motion.js").read_text()


async def reduce(page: Page) -> None:
    """Stop what moves in each frame of `page`; a frame that is gone or refuses is left as it is."""
    for frame in page.frames:
        try:
            counts = await frame.evaluate(_STILL)
        except PlaywrightError as error:  # a frame detached meanwhile, or a page that broke the globals
            LOG.debug("reduce_motion skipped a frame: %s", error)
            continue
        if any(counts.values()):
            LOG.debug("reduce_motion in %s: %s", frame.url[:80], counts)
