"""Which part of the page an image shows: an element (`selector`), a clip, or the viewport after
`scroll_into_view`. Regions are in CSS pixels, page coordinates; captures come out in device pixels.

- `selector` with `selector_algorithm=default`: the element's box, rendered beyond the viewport when
  the element is larger than it (scrolled to first when `selector_scroll_into_view`).
- `selector` with `selector_algorithm=clip`: the page region under the element's box as the viewport
  shows it (overlays included); parts outside the viewport are cut off.
- `clip_*`: that region. With `capture_beyond_viewport=true` it is rendered in place (fixed elements
  where they are at the top of the page); otherwise the page is scrolled so the region is in view, as a
  visitor would see it, and only a region taller than the viewport is rendered beyond it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from playwright.async_api import ElementHandle, Page

from render.contract.errors import ErrorDetail, SelectorNotFound
from render.contract.options import TakeOptions
from render.page.preparation import find


@dataclass(frozen=True)
class Region:
    """A rectangle of the page to capture."""

    x: float
    y: float
    width: float
    height: float
    beyond_viewport: bool

    def device_size(self, scale: float) -> tuple[int, int]:
        return max(1, round(self.width * scale)), max(1, round(self.height * scale))

    def as_clip(self) -> dict[str, float]:
        return {"x": self.x, "y": self.y, "width": self.width, "height": self.height, "scale": 1}


_BOX = """(element) => {
  const r = element.getBoundingClientRect();
  return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height];
}"""
_VIEWPORT = "() => [window.scrollX, window.scrollY, window.innerWidth, window.innerHeight]"


async def _viewport(page: Page) -> tuple[float, float, float, float]:
    x, y, width, height = await page.evaluate(_VIEWPORT)
    return float(x), float(y), float(width), float(height)


async def _element_region(page: Page, element: ElementHandle, options: TakeOptions) -> Region:
    if options.selector_scroll_into_view:
        await element.scroll_into_view_if_needed()
    x, y, width, height = await element.evaluate(_BOX)
    if width < 1 or height < 1:
        raise SelectorNotFound(f"selector: {options.selector!r} matches an element with no size (hidden?).",
                               [ErrorDetail("selector", "the element has no size")])
    # Whole device pixels: round the box outwards.
    left, top = math.floor(x), math.floor(y)
    box_w, box_h = math.ceil(x + width) - left, math.ceil(y + height) - top
    view_x, view_y, view_w, view_h = await _viewport(page)
    if options.selector_algorithm == "clip":
        right, bottom = min(left + box_w, view_x + view_w), min(top + box_h, view_y + view_h)
        left, top = max(left, view_x), max(top, view_y)
        if right <= left or bottom <= top:
            raise SelectorNotFound(f"selector: {options.selector!r} is outside the viewport; use "
                                   "selector_scroll_into_view=true or selector_algorithm=default.",
                                   [ErrorDetail("selector", "outside the viewport")])
        return Region(left, top, right - left, bottom - top, beyond_viewport=False)
    beyond = box_w > view_w or box_h > view_h or not (
        view_x <= left and left + box_w <= view_x + view_w and view_y <= top and top + box_h <= view_y + view_h)
    return Region(left, top, box_w, box_h, beyond_viewport=beyond)


async def _clip_region(page: Page, options: TakeOptions) -> Region:
    assert options.clip_x is not None and options.clip_y is not None
    assert options.clip_width is not None and options.clip_height is not None
    x, y, width, height = options.clip_x, options.clip_y, options.clip_width, options.clip_height
    if options.capture_beyond_viewport:
        return Region(x, y, width, height, beyond_viewport=True)
    _, _, view_w, view_h = await _viewport(page)
    await page.evaluate("([x, y]) => window.scrollTo({left: x, top: y, behavior: 'instant'})", [x, y])
    return Region(x, y, width, height, beyond_viewport=width > view_w or height > view_h)


async def scroll_into_view(page: Page, options: TakeOptions) -> None:
    """`scroll_into_view`: bring the element to the top of the viewport, then adjust."""
    if options.scroll_into_view is None:
        return
    element = await find(page, "scroll_into_view", options.scroll_into_view)
    if element is None:
        raise SelectorNotFound(f"scroll_into_view: no element matches {options.scroll_into_view!r}.",
                               [ErrorDetail("scroll_into_view", "no element matches")])
    try:
        await element.evaluate("(element, dy) => { element.scrollIntoView({block: 'start', behavior: 'instant'}); "
                               "window.scrollBy({top: dy, behavior: 'instant'}); }",
                               options.scroll_into_view_adjust_top)
    finally:
        await element.dispose()


async def region_for(page: Page, options: TakeOptions) -> Region | None:
    """The region to capture, or None for the viewport."""
    if options.selector is not None:
        element = await find(page, "selector", options.selector)
        if element is None:
            if options.error_on_selector_not_found:
                raise SelectorNotFound(f"selector: no element matches {options.selector!r}.",
                                       [ErrorDetail("selector", "no element matches")])
            return None
        try:
            return await _element_region(page, element, options)
        finally:
            await element.dispose()
    if options.clip_x is not None:
        return await _clip_region(page, options)
    return None
