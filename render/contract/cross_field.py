"""The rules of `/take` that join several parameters (TakeOptions' validator): which go together, which
exclude each other, and which apply to which formats. Each broken rule names the parameter to change."""

from __future__ import annotations

from typing import Any

from render.contract.errors import ErrorDetail
from render.contract.formats import IMAGE_FORMATS
from render.contract.store import store_problems
from render.contract.validation import all_or_none

SYNC_TIMEOUT_MAX = 90
ASYNC_TIMEOUT_MAX = 300
DELAY_SYNC_MAX = 30


def take_problems(options: Any) -> list[ErrorDetail]:
    """Every cross-field rule `options` (a TakeOptions, which calls this from its validator) breaks."""
    problems: list[ErrorDetail] = []
    sources = [name for name in ("url", "html", "markdown") if getattr(options, name) is not None]
    if len(sources) != 1:
        problems.append(ErrorDetail(
            "url", "exactly one of url, html or markdown is required"
            + (f" (got {', '.join(sources)})" if sources else "")))
    problems += all_or_none(options, "clip", ("clip_x", "clip_y", "clip_width", "clip_height"))
    problems += all_or_none(options, "geolocation", ("geolocation_latitude", "geolocation_longitude",
                                                   "geolocation_accuracy"))
    timeout_max = ASYNC_TIMEOUT_MAX if options.async_ else SYNC_TIMEOUT_MAX
    if options.timeout > timeout_max:
        mode = "async" if options.async_ else "synchronous (use async=true for up to 300)"
        problems.append(ErrorDetail("timeout", f"must be at most {timeout_max} for {mode} requests"))
    if options.delay > DELAY_SYNC_MAX and not options.async_:
        problems.append(ErrorDetail("delay", f"values above {DELAY_SYNC_MAX} require async=true"))
    if options.delay >= options.timeout:
        problems.append(ErrorDetail("delay", f"must be shorter than timeout ({options.timeout} s)"))
    if options.cache and (options.async_ or options.webhook_url):
        problems.append(ErrorDetail("cache", "cannot be combined with async or webhook_url"))
    if options.markdown_content == "main" and options.format != "markdown" and not (
            options.metadata_content and options.metadata_content_format == "markdown"):
        problems.append(ErrorDetail("markdown_content",
                                    "applies to format=markdown or metadata_content_format=markdown"))
    problems += all_or_none(options, "custom sheet size", ("pdf_width", "pdf_height"))
    if options.pdf_a is not None and (options.pdf_user_password or options.pdf_owner_password):
        problems.append(ErrorDetail("pdf_a", "PDF/A forbids encryption: leave out the pdf passwords"))
    if options.pdf_permissions is not None and not (options.pdf_user_password or options.pdf_owner_password):
        problems.append(ErrorDetail("pdf_permissions", "needs pdf_owner_password or pdf_user_password"))
    if options.cache_stale_ttl is not None and not options.cache:
        problems.append(ErrorDetail("cache_stale_ttl", "requires cache=true"))
    if options.proxy is not None and options.ip_country_code is not None:
        problems.append(ErrorDetail("proxy", "give either proxy or ip_country_code, not both"))
    for name in ("watermark", "watermark_image_url", "blur"):
        if getattr(options, name) and options.format not in IMAGE_FORMATS:
            problems.append(ErrorDetail(name, f"applies to image formats, not {options.format}"))
    if options.vision_provider_api_key is not None and options.format not in IMAGE_FORMATS:
        problems.append(ErrorDetail("vision_provider_api_key", f"applies to image formats, not {options.format}"))
    for name in ("vision_prompt", "vision_max_tokens", "vision_response_schema"):
        if getattr(options, name) is not None and options.vision_provider_api_key is None:
            problems.append(ErrorDetail(name, "needs vision_provider_api_key"))
    problems += store_problems(options)
    if options.full_page_slices and not options.full_page:
        problems.append(ErrorDetail("full_page_slices", "needs full_page=true"))
    if options.full_page_slices and options.format not in IMAGE_FORMATS:
        problems.append(ErrorDetail("full_page_slices", f"applies to image formats, not {options.format}"))
    if options.full_page_slice_overlap_height >= options.full_page_slice_height:
        problems.append(ErrorDetail("full_page_slice_overlap_height",
                                    "must be less than full_page_slice_height "
                                    f"({options.full_page_slice_height})"))
    if options.har_content != "omit" and not options.har:
        problems.append(ErrorDetail("har_content", "needs har=true"))
    if options.archive and options.format == "wacz":
        problems.append(ErrorDetail("archive", "format=wacz answers the web archive itself: leave out archive"))
    elif options.archive and options.format not in IMAGE_FORMATS and options.format != "pdf":
        problems.append(ErrorDetail("archive", f"applies to image and PDF formats, not {options.format}"))
    if options.format == "wacz":
        problems += _not_for_wacz(options)
    if options.omit_background and options.format not in ("png", "webp"):
        problems.append(ErrorDetail("omit_background", "needs a format with transparency: png or webp"))
    return problems


# What shapes only an image or a PDF, refused with format=wacz when given (its screenshots are the viewport's, and
# the whole page's with full_page, as PNG): by group of TakeOptions, and by name.
_WACZ_REFUSED_GROUPS = ("Image", "PDF", "Clip")
_WACZ_REFUSED = ("selector", "selector_algorithm", "error_on_selector_not_found", "selector_scroll_into_view")


def _not_for_wacz(options: Any) -> list[ErrorDetail]:
    """The options given that make no sense for a web archive, each named."""
    problems = []
    for name in sorted(options.model_fields_set):
        field = type(options).model_fields[name]
        group = field.json_schema_extra.get("group") if isinstance(field.json_schema_extra, dict) else None
        if group in _WACZ_REFUSED_GROUPS or name in _WACZ_REFUSED:
            problems.append(ErrorDetail(field.alias or name, "shapes an image or a PDF, not format=wacz"))
    return problems
