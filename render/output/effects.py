"""Effects on the final image: `blur` over elements' boxes and the watermarks, by pyvips.

Blurring happens in pixels after the capture, never as page CSS, so no page style can undo it: each box
is pixelated into blocks at least as large as a line of text, then smoothed, which leaves no detail of
what was under it. Watermarks go bottom-right with a margin: the image above the text.
"""

from __future__ import annotations

import pyvips
from playwright.async_api import Page

from render.contract.errors import ErrorDetail, RequestNotValid
from render.contract.options import TakeOptions
from render.net.egress import EgressProxy, Listener
from render.net.traffic import REFUSED_HEADER
from render.output.imaging import Step
from render.page.preparation import split_selector

MIN_BLOCK_PX = 12  # pixelation block: larger than the strokes of body text
WATERMARK_MAX_BYTES = 10 * 1024 * 1024
WATERMARK_TIMEOUT_SECONDS = 10
WATERMARK_FONT = "Liberation Sans Bold"

# Boxes of every element the selectors match, in document coordinates (CSS px).
_BOXES = """([selectors]) => {
  const boxes = [];
  for (const [selector, deep] of selectors) {
    const roots = [document];
    while (roots.length) {
      const root = roots.shift();
      for (const element of root.querySelectorAll(selector)) {
        const r = element.getBoundingClientRect();
        if (r.width > 0 && r.height > 0) boxes.push([r.left + scrollX, r.top + scrollY, r.width, r.height]);
      }
      if (!deep) break;
      for (const element of root.querySelectorAll('*')) if (element.shadowRoot) roots.push(element.shadowRoot);
    }
  }
  return boxes;
}"""

Box = tuple[float, float, float, float]


def wanted(options: TakeOptions) -> bool:
    return bool(options.blur or options.watermark or options.watermark_image_url)


async def element_boxes(page: Page, selectors: list[str]) -> list[Box]:
    """Document-coordinate boxes of the elements `selectors` match (`shadow/` pierces shadow roots)."""
    if not selectors:
        return []
    boxes = await page.evaluate(_BOXES, [[list(split_selector(s)) for s in selectors]])
    return [(float(x), float(y), float(w), float(h)) for x, y, w, h in boxes]


def to_image_pixels(boxes: list[Box], origin: tuple[float, float], scale: float) -> list[tuple[int, int, int, int]]:
    """Boxes relative to the captured area's `origin`, in device pixels."""
    return [(round((x - origin[0]) * scale), round((y - origin[1]) * scale), round(w * scale), round(h * scale))
            for x, y, w, h in boxes]


def blur(boxes: list[tuple[int, int, int, int]]) -> Step:
    """Pixelate, then smooth, each box (clipped to the image)."""

    def step(image: pyvips.Image) -> pyvips.Image:
        for x, y, w, h in boxes:
            left, top = max(0, x), max(0, y)
            right, bottom = min(image.width, x + w), min(image.height, y + h)
            if right - left < 1 or bottom - top < 1:
                continue
            region = image.crop(left, top, right - left, bottom - top)
            block = max(MIN_BLOCK_PX, round(min(region.width, region.height) / 4))
            small = region.resize(1 / block, kernel="linear")
            blocks = small.zoom(block, block).crop(0, 0, min(region.width, small.width * block),
                                                  min(region.height, small.height * block))
            if (blocks.width, blocks.height) != (region.width, region.height):
                blocks = blocks.embed(0, 0, region.width, region.height, extend="copy")
            smooth = blocks.gaussblur(block / 2).cast(image.format)
            image = image.insert(smooth, left, top)
        return image

    return step


def watermark(text: str | None, picture: bytes | None, opacity: float) -> Step:
    """Text and/or image watermark at the bottom right, `opacity` 0 to 1."""

    def step(image: pyvips.Image) -> pyvips.Image:
        margin = max(8, round(min(image.width, image.height) * 0.02))
        bottom = image.height - margin
        overlays: list[tuple[pyvips.Image, int, int]] = []
        if text:
            label = _text_overlay(text, _font_px(image), opacity)
            bottom -= label.height
            overlays.append((label, image.width - margin - label.width, bottom))
        if picture is not None:
            mark = _picture_overlay(picture, image, opacity)
            bottom -= mark.height + (margin // 2 if text else 0)
            overlays.append((mark, image.width - margin - mark.width, bottom))
        had_alpha = image.hasalpha()
        base = (image if had_alpha else image.bandjoin(255)).copy(interpretation="srgb")
        for overlay, x, y in overlays:
            base = base.composite2(overlay, "over", x=x, y=y).cast("uchar")
        return base if had_alpha else base.extract_band(0, n=3)

    return step


def _font_px(image: pyvips.Image) -> int:
    return max(12, min(72, round(min(image.width, image.height) * 0.04)))


def _text_overlay(text: str, size: int, opacity: float) -> pyvips.Image:
    """White text with a dark halo (legible on any background), as RGBA."""
    mask = pyvips.Image.text(_escape_markup(text), font=f"{WATERMARK_FONT} {size}", dpi=72)
    pad = max(2, size // 6)
    mask = mask.embed(pad, pad, mask.width + 2 * pad, mask.height + 2 * pad)
    halo = mask.gaussblur(pad / 2).linear(2.5, 0).cast("uchar")
    white = mask.new_from_image([255, 255, 255]).bandjoin(mask).copy(interpretation="srgb")
    dark = mask.new_from_image([0, 0, 0]).bandjoin(halo).copy(interpretation="srgb")
    label = dark.composite2(white, "over").linear([1, 1, 1, opacity], 0).cast("uchar")
    return label.copy(interpretation="srgb")


def _picture_overlay(data: bytes, image: pyvips.Image, opacity: float) -> pyvips.Image:
    """The watermark picture as RGBA, shrunk to a quarter of the image at most."""
    try:
        picture = pyvips.Image.new_from_buffer(data, "").colourspace("srgb")
        if not picture.hasalpha():
            picture = picture.bandjoin(255)
        picture = picture.extract_band(0, n=4)
        scale = min(1.0, image.width / 4 / picture.width, image.height / 4 / picture.height)
        if scale < 1:
            picture = picture.resize(scale)
        return picture.linear([1, 1, 1, opacity], 0).cast("uchar").copy(interpretation="srgb")
    except pyvips.Error:
        raise RequestNotValid("watermark_image_url: the file is not an image this server can read.",
                              [ErrorDetail("watermark_image_url", "not an image")]) from None


async def fetch_watermark(url: str, egress: EgressProxy | None, listener: Listener | None = None) -> bytes:
    """The watermark picture, fetched through the egress proxy, so the network policy and the job's upstream apply:
    through `listener`, its job's context's own, when given."""
    import httpx  # on first use: with its command-line extras about 8 MB a worker rarely needs

    field = "watermark_image_url"
    try:
        proxy = (listener.url if listener is not None else egress.url) if egress is not None else None
        async with httpx.AsyncClient(proxy=proxy, timeout=WATERMARK_TIMEOUT_SECONDS,
                                     follow_redirects=True, max_redirects=5, trust_env=False) as client:
            async with client.stream("GET", url) as response:
                if response.headers.get(REFUSED_HEADER):
                    reason = (await response.aread()).decode(errors="replace")
                    raise RequestNotValid(f"{field}: {reason}.", [ErrorDetail(field, "address not allowed")])
                if response.status_code != 200:
                    raise RequestNotValid(f"{field}: {url} answered HTTP {response.status_code}.",
                                          [ErrorDetail(field, f"HTTP {response.status_code}")])
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body.extend(chunk)
                    if len(body) > WATERMARK_MAX_BYTES:
                        raise RequestNotValid(f"{field}: the file is larger than {WATERMARK_MAX_BYTES} bytes.",
                                              [ErrorDetail(field, "too large")])
                return bytes(body)
    except httpx.HTTPError as error:
        refusals = egress.traffic(listener).refusals if egress is not None else []
        reason = refusals[-1].reason if refusals else str(error) or type(error).__name__
        raise RequestNotValid(f"{field}: could not fetch {url}: {reason}.",
                              [ErrorDetail(field, "could not be fetched")]) from None


def _escape_markup(text: str) -> str:
    """libvips renders text as Pango markup: the caller's text is plain."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
