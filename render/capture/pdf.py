"""A page as PDF: Chromium's print, with the spec's paper sizes, margins and fit-to-one-page, custom sheets, the
page's own CSS size, scale, page ranges, header and footer templates, tags and an outline; then the document's
title, author, subject and keywords written into it (pikepdf, in its document information and XMP metadata)."""

from __future__ import annotations

import io
import secrets
from typing import Any

from playwright.async_api import Error as PlaywrightError

from render.browser.page_changes import Effect
from render.browser.tabs import Tab
from render.contract.errors import ErrorDetail, RequestNotValid
from render.contract.options import TakeOptions
from render.contract.values import TEMPLATE_RULE
from render.output.pdf_archive import to_pdf_a

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
    scale = options.pdf_scale
    page_ranges = options.pdf_page_ranges or ""
    if options.pdf_fit_one_page:
        scale = await _fit_one_page_scale(options, tab, margin)
        page_ranges = "1"
    sheet: dict[str, Any] = ({"width": options.pdf_width, "height": options.pdf_height} if options.pdf_width
                             else {"format": options.pdf_paper_format})
    templates = options.pdf_header_template is not None or options.pdf_footer_template is not None
    try:
        printed = await tab.page.pdf(
            **sheet,
            landscape=options.pdf_landscape,
            print_background=options.pdf_print_background,
            margin=margin,  # type: ignore[arg-type]  # a PdfMargins TypedDict
            scale=scale,
            page_ranges=page_ranges,
            prefer_css_page_size=options.pdf_prefer_css_page_size,
            display_header_footer=templates,
            # Chromium prints its own date and title where a template is not given: an empty one prints nothing.
            header_template=options.pdf_header_template or "<span></span>",
            footer_template=options.pdf_footer_template or "<span></span>",
            tagged=options.pdf_tagged or options.pdf_outline,
            outline=options.pdf_outline,
        )
    except PlaywrightError as error:
        if "page range" in str(error).lower():
            raise RequestNotValid(f"pdf_page_ranges: {options.pdf_page_ranges} names pages the document does not "
                                  "have.", [ErrorDetail("pdf_page_ranges", "beyond the document's pages")]) from None
        if templates and "printing failed" in str(error).lower():
            # A template that asks for something while printing (a stylesheet or font by URL in a form the
            # request's check did not read) stops Chromium's print: the caller's template, not a fault of ours.
            tab.changed(Effect.SETTINGS, "printing failed with a template")
            fields = [name for name in ("pdf_header_template", "pdf_footer_template") if getattr(options, name)]
            raise RequestNotValid(f"{' and '.join(fields)}: Chromium could not print with this template; a "
                                  f"template draws only with {TEMPLATE_RULE}.",
                                  [ErrorDetail(name, "could not be printed") for name in fields]) from None
        raise
    document = with_document_info(printed, options)
    if options.pdf_a is not None:
        document = await to_pdf_a(document, options.pdf_a)
    return protected(document, options)


def with_document_info(pdf: bytes, options: TakeOptions) -> bytes:
    """`pdf` with pdf_title, pdf_author, pdf_subject and pdf_keywords in its document information and its XMP
    metadata (what PDF readers and archives show), when any is given."""
    given = {name: getattr(options, f"pdf_{name}") for name in ("title", "author", "subject", "keywords")}
    if not any(given.values()):
        return pdf
    import pikepdf  # on first use: a worker that never prints with document information never loads it

    with pikepdf.open(io.BytesIO(pdf)) as document:
        with document.open_metadata(set_pikepdf_as_editor=False) as xmp:
            if given["title"]:
                xmp["dc:title"] = given["title"]
            if given["author"]:
                xmp["dc:creator"] = [given["author"]]
            if given["subject"]:
                xmp["dc:description"] = given["subject"]
            if given["keywords"]:
                xmp["pdf:Keywords"] = given["keywords"]
        for name, value in given.items():
            if value:
                document.docinfo[f"/{name.capitalize()}"] = value
        out = io.BytesIO()
        document.save(out)
    return out.getvalue()


# pdf_permissions' names -> pikepdf's permission flags they allow.
ALLOWS = {"print": ("print_lowres",), "print_highres": ("print_lowres", "print_highres"), "copy": ("extract",),
          "annotate": ("modify_annotation",), "fill_forms": ("modify_form",), "assemble": ("modify_assembly",),
          "modify": ("modify_other",), "accessibility": ("accessibility",)}


def protected(pdf: bytes, options: TakeOptions) -> bytes:
    """`pdf` encrypted (AES-256, PDF 2.0's R=6) when a password is given: opened with pdf_user_password (none: it
    opens without one), pdf_permissions enforced unless opened with pdf_owner_password (none given: a random one,
    so nobody can lift them)."""
    if options.pdf_user_password is None and options.pdf_owner_password is None:
        return pdf
    import pikepdf

    allowed = {flag for name in (options.pdf_permissions if options.pdf_permissions is not None else ALLOWS)
               for flag in ALLOWS[name]}
    permissions = pikepdf.Permissions(**{flag: flag in allowed for flags in ALLOWS.values() for flag in flags})
    owner = options.pdf_owner_password or secrets.token_urlsafe(24)
    with pikepdf.open(io.BytesIO(pdf)) as document:
        out = io.BytesIO()
        document.save(out, encryption=pikepdf.Encryption(user=options.pdf_user_password or "", owner=owner, R=6,
                                                         allow=permissions))
    return out.getvalue()


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
    await tab.emulate_media("print")
    content = await tab.page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
    width_in, height_in = PAPER_INCHES[options.pdf_paper_format]
    if options.pdf_width and options.pdf_height:  # a custom sheet
        width_in, height_in = (css_length_to_px(length) / CSS_PX_PER_INCH
                               for length in (options.pdf_width, options.pdf_height))
    if options.pdf_landscape:
        width_in, height_in = height_in, width_in
    px = css_length_to_px
    usable_w = width_in * CSS_PX_PER_INCH - px(margin["left"]) - px(margin["right"])
    usable_h = height_in * CSS_PX_PER_INCH - px(margin["top"]) - px(margin["bottom"])
    scale = min(usable_w / max(1, content[0]), usable_h / max(1, content[1]), 1.0)
    return max(0.1, scale)
