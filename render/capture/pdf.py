"""A page as PDF: Chromium's print, with the spec's paper sizes, margins and fit-to-one-page."""

from __future__ import annotations

from render.browser.tabs import Tab
from render.contract.options import TakeOptions

CSS_PX_PER_INCH = 96
PAPER_INCHES = {  # width, height in portrait
    "a0": (33.1, 46.8), "a1": (23.4, 33.1), "a2": (16.54, 23.4), "a3": (11.7, 16.54),
    "a4": (8.27, 11.7), "a5": (5.83, 8.27), "a6": (4.13, 5.83),
    "letter": (8.5, 11), "legal": (8.5, 14), "tabloid": (11, 17),
}


async def print_pdf(options: TakeOptions, tab: Tab) -> bytes:
    """The page printed as the pdf_* options say."""
    margin = {
        side: getattr(options, f"pdf_margin_{side}") or options.pdf_margin
        for side in ("top", "right", "bottom", "left")
    }
    scale = 1.0
    page_ranges = ""
    if options.pdf_fit_one_page:
        scale = await _fit_one_page_scale(options, tab, margin)
        page_ranges = "1"
    return await tab.page.pdf(
        format=options.pdf_paper_format,
        landscape=options.pdf_landscape,
        print_background=options.pdf_print_background,
        margin=margin,  # type: ignore[arg-type]  # a PdfMargins TypedDict
        scale=scale,
        page_ranges=page_ranges,
    )


def css_length_to_px(value: str) -> float:
    """`10mm`, `1in`, `2cm`, `12px` or a bare number (pixels) to CSS pixels."""
    units = {"px": 1.0, "in": 96.0, "cm": 96 / 2.54, "mm": 96 / 25.4}
    value = value.strip().lower()
    for unit, factor in units.items():
        if value.endswith(unit):
            return float(value[: -len(unit)]) * factor
    return float(value)


async def _fit_one_page_scale(options: TakeOptions, tab: Tab, margin: dict[str, str]) -> float:
    """Scale at which the whole document fits one sheet (Chromium allows 0.1 to 2)."""
    tab.dirty = True
    await tab.page.emulate_media(media="print")
    content = await tab.page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
    width_in, height_in = PAPER_INCHES[options.pdf_paper_format]
    if options.pdf_landscape:
        width_in, height_in = height_in, width_in
    px = css_length_to_px
    usable_w = width_in * CSS_PX_PER_INCH - px(margin["left"]) - px(margin["right"])
    usable_h = height_in * CSS_PX_PER_INCH - px(margin["top"]) - px(margin["bottom"])
    scale = min(usable_w / max(1, content[0]), usable_h / max(1, content[1]), 1.0)
    return max(0.1, scale)
