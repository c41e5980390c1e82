"""The first groups of `/take`'s parameters (source, response, viewport, full page): TakeOptions' base, so that
the parameters keep their order (a base's fields come first) and render.contract.options its size."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from render.contract.formats import Format
from render.contract.values import Bool, DeviceId, FileName, HttpUrl, OptionalBool, ResponseType, param


class PageParameters(BaseModel):
    """Where the page comes from, what is answered, the viewport and the full page."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    # Source: exactly one.
    url: HttpUrl | None = param(None, "Source", "HTTP or HTTPS address of the page to capture.")
    html: str | None = param(None, "Source", "Raw HTML to render.")
    markdown: str | None = param(None, "Source", "Markdown, rendered to styled HTML first.")

    # Response
    format: Format = param("png", "Response", "Output format.")  # type: ignore[valid-type]
    response_type: ResponseType = param(
        "by_format", "Response", "by_format: the bytes; json: metadata and a URL; empty: status only.")
    include_shadow_dom: Bool = param(False, "Response", "html and markdown output (and metadata_content) "
                                     "include what web components render in their shadow roots, closed ones "
                                     "too: declarative <template shadowrootmode> in HTML, the composed text in "
                                     "Markdown.")
    attachment_name: FileName | None = param(None, "Response", "File name the bytes are offered to save as "
                                        "(Content-Disposition: attachment) with response_type=by_format.",
                                        max_length=255)

    # Viewport
    viewport_width: int | None = param(None, "Viewport", "Viewport width in CSS pixels.", shown_default="1280",
                                       ge=1, le=16384)
    viewport_height: int | None = param(None, "Viewport", "Viewport height in CSS pixels.", shown_default="1024",
                                        ge=1, le=16384)
    device_scale_factor: float | None = param(None, "Viewport", "Device pixel ratio.", shown_default="1",
                                              ge=1, le=5)
    viewport_device: DeviceId | None = param(None, "Viewport", "Device preset id; explicit viewport "
                                             "parameters override it.")
    viewport_mobile: OptionalBool = param(None, "Viewport", "Mobile viewport handling.", shown_default="false")
    viewport_has_touch: OptionalBool = param(None, "Viewport", "Touch emulation.", shown_default="false")
    viewport_landscape: OptionalBool = param(None, "Viewport", "Landscape orientation; turns a portrait viewport "
                                          "or preset sideways.", shown_default="false")

    # Full page
    full_page: Bool = param(False, "Full page", "Capture the whole scrollable page.")
    full_page_scroll: OptionalBool = param(None, "Full page", "Scroll through the page first so lazy content "
                                           "loads (default true with full_page); stops at the height cap or "
                                           "after half the remaining time.", shown_default="true with full_page")
    full_page_scroll_delay: int | None = param(None, "Full page", "Milliseconds between scroll steps; unset: each "
                                               "waits for what it brought in, at most 400.", ge=0, le=10000,
                                               shown_default="as the page needs, at most 400")
    full_page_scroll_by: int | None = param(None, "Full page", "Pixels per scroll step.",
                                            shown_default="viewport height", ge=1)
    full_page_max_height: int | None = param(None, "Full page", "Caps the captured height in CSS pixels.",
                                             shown_default="what SCREENSHOT_MAX_IMAGE_PIXELS allows", ge=1)
    full_page_algorithm: Literal["default", "by_sections"] = param(
        "default", "Full page", "default: one native capture of the whole page, at any height; by_sections: "
        "one viewport at a time, stitched. Fixed elements appear where the first screen has them, sticky ones "
        "where the document puts them, each once.")
    full_page_slices: Bool = param(False, "Full page", "Also cut the final full-page image into slices, each "
                                   "stored with its own URL: `slices` in the JSON body, the manifest's URL in "
                                   "x-service-full-page-slices-url.")
    full_page_slice_height: int = param(4000, "Full page", "Most image pixels per slice.", ge=1, le=16000)
    full_page_slice_overlap_height: int = param(0, "Full page", "Image pixels each slice repeats of the one "
                                                "before (less than full_page_slice_height).", ge=0, le=15999)
