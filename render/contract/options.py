"""The typed `/take` request: every parameter of the spec, with its type, default, range and rules.

This is the contract between the API and the workers: the API validates a request into
`TakeOptions`, sends `to_payload()` over the queue, and the worker rebuilds the same model. It
imports neither Playwright nor FastAPI. Every violation is collected and reported at once by
`parse_take_options`, as `RequestNotValid` with one `ErrorDetail` per problem. What each kind of value must
be is in render.contract.values; what each format is, in render.contract.formats.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, ConfigDict, model_validator

from render.contract.cross_field import ASYNC_TIMEOUT_MAX, take_problems
from render.contract.devices import Viewport, resolve_viewport
from render.contract.errors import ErrorDetail
from render.contract.formats import Format, OutputFormat, output_format, quality_formats  # noqa: F401 (pyproject: mypy)
from render.contract.page_parameters import PageParameters
from render.contract.validation import CrossFieldError, validate_all
from render.contract.values import (
    ApiKey,
    Bool,
    CountryCode,
    CssLength,
    HeaderValue,
    HostPatterns,
    HttpUrl,
    JsonSchema,
    OptionalBool,
    PageRanges,
    PaperFormat,
    PdfPassword,
    PdfPermissions,
    PdfTemplate,
    ProxyUrl,
    ResourceStatuses,
    ResourceType,
    Selectors,
    StorageKey,
    StoreEndpoint,
    StrList,
    TimeZone,
    Values,
    WaitEvent,
    as_list,
    param,
)

CACHE_TTL_MIN = 14400
CACHE_TTL_MAX = 2592000
# The vision request: never in a payload, sealed for the job (the key is a secret, the prompt the caller's).
VISION_FIELDS = frozenset({"vision_provider_api_key", "vision_prompt", "vision_max_tokens", "vision_response_schema"})


class TakeOptions(PageParameters):
    """Every parameter of `/take`. Defaults are the spec's; `None` means "not given". The first groups (source,
    response, viewport, full page) are PageParameters', in render.contract.page_parameters: fields keep their
    order (a base's come first), and this module its size."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)
    job_kind: ClassVar[str] = "take"  # which worker routine runs it (animate.options.AnimateOptions: "animate")

    # Selector and scrolling
    selector: str | None = param(None, "Selector", "Only this element is output; `shadow/` prefix "
                                 "searches open shadow roots too. No match: the viewport, or "
                                 "selector_not_found with error_on_selector_not_found.")
    selector_algorithm: Literal["default", "clip"] = param(
        "default", "Selector", "default: the element's box, rendered beyond the viewport if larger; clip: "
        "the page region under the box as the viewport shows it (overlays included, cut at the viewport).")
    selector_scroll_into_view: Bool = param(True, "Selector", "Scroll to the element first.")
    error_on_selector_not_found: Bool = param(False, "Selector", "Fail with selector_not_found when "
                                              "nothing matches.")
    scroll_into_view: str | None = param(None, "Selector", "Scroll until this element is at the top of "
                                         "the viewport, then capture the viewport.")
    scroll_into_view_adjust_top: int = param(0, "Selector", "Pixels to adjust the scroll by; positive "
                                             "down, negative up.")
    capture_beyond_viewport: Bool = param(False, "Selector", "For clip_*: render the region in place, "
                                          "beyond the viewport; false scrolls it into view first, as a "
                                          "visitor would see it.")

    # Clip (all four together)
    clip_x: int | None = param(None, "Clip", "Left edge of the clip, CSS pixels of the page.", ge=0)
    clip_y: int | None = param(None, "Clip", "Top edge of the clip, CSS pixels of the page.", ge=0)
    clip_width: int | None = param(None, "Clip", "Width of the clip, pixels.", ge=1)
    clip_height: int | None = param(None, "Clip", "Height of the clip, pixels.", ge=1)

    # Blocking
    block_ads: Bool = param(False, "Blocking", "Block ads (EasyList).")
    block_cookie_banners: Bool = param(False, "Blocking", "Refuse cookie consent banners: DuckDuckGo's "
                                       "autoconsent rules (hundreds of consent platforms and a heuristic) opt out "
                                       "with the banner's own buttons, or hide it; a banner still up is hidden "
                                       "on evidence (docs/using.md, Cookie banners), and what it left (backdrop, blur, "
                                       "scroll lock) is undone.")
    block_banners_by_heuristics: Bool = param(False, "Blocking", "Hide consent banners on evidence alone (on "
                                              "top of the page, consent wording, a consent action among their "
                                              "controls) and sign-up overlays that ask for an e-mail address; "
                                              "undo their backdrop, blur and scroll lock.")
    block_chats: Bool = param(False, "Blocking", "Block live chat widgets of 17 vendors (Intercom, Drift, "
                              "Crisp, ...; render/page/rules/chats.toml).")
    block_socials: Bool = param(False, "Blocking", "Block social media widgets of 10 vendors: like, share and "
                                "follow buttons, page plugins, share bars (Facebook, X, LinkedIn, AddThis, ...; "
                                "render/page/rules/socials.toml). Embedded posts keep the page's own fallback.")
    block_trackers: Bool = param(False, "Blocking", "Block trackers (EasyPrivacy).")
    block_requests: StrList = param([], "Blocking", "URL patterns to block; `*` is a wildcard.")
    block_resources: Annotated[list[ResourceType], Values, BeforeValidator(as_list)] = param(
        [], "Blocking", "Resource types to block.")
    hide_selectors: StrList = param([], "Blocking", "Elements hidden with display: none.")

    # Customization
    styles: str | None = param(None, "Customization", "CSS injected before capture.")
    scripts: str | None = param(None, "Customization", "JavaScript run before capture, as the body of an "
                                "async function (await works); its errors are reported.")
    scripts_wait_until: Annotated[list[WaitEvent], Values, BeforeValidator(as_list)] = param(
        [], "Customization", "Events to wait for after the script; required if it navigates.")
    click: str | None = param(None, "Customization", "Element to click before capture.")
    error_on_click_selector_not_found: Bool = param(True, "Customization", "Fail when `click` "
                                                    "matches nothing.")
    hover: str | None = param(None, "Customization", "Element to hover before capture.")
    error_on_hover_selector_not_found: Bool = param(True, "Customization", "Fail when `hover` "
                                                    "matches nothing.")

    # Display emulation
    dark_mode: OptionalBool = param(None, "Emulation", "prefers-color-scheme: true dark, false light, "
                                    "omitted the site's default.")
    reduced_motion: Bool = param(False, "Emulation", "Emulate prefers-reduced-motion.")
    reduce_motion: Bool = param(False, "Emulation", "Bring the page to a still state before capture: "
                                "finite animations end, looping ones, video, audio and slider autoplay "
                                "stop at their start; implies reduced_motion.")
    media_type: Literal["screen", "print"] = param("screen", "Emulation", "CSS media type (when omitted, "
                                                   "PDFs keep Chromium's print media).")
    omit_background: Bool = param(False, "Emulation", "Transparent background (png, webp).")

    # Wait and timing
    delay: int = param(0, "Wait", "Seconds to wait before capture; above 30 requires async.", ge=0,
                       le=ASYNC_TIMEOUT_MAX)
    wait_until: Annotated[list[WaitEvent], Values, BeforeValidator(as_list)] = param(
        ["load"], "Wait", "Events that must all have happened before capture.", min_length=1)
    wait_for_selector: Selectors | None = param(None, "Wait", "Wait for these selectors (comma-separated).")
    wait_for_selector_algorithm: Literal["at_least_one", "at_least_by_count"] = param(
        "at_least_one", "Wait", "at_least_one, or at_least_by_count (each selector at least once).")
    timeout: int = param(60, "Wait", "Seconds for the whole capture: at most 90, or 300 with async.",
                         ge=1, le=ASYNC_TIMEOUT_MAX)
    navigation_timeout: int = param(30, "Wait", "Seconds for the page to load, at most 30.", ge=1, le=30)
    wait_for_expression: str | None = param(None, "Wait", "A JavaScript expression (or function) evaluated in "
                                            "the page every 50 ms until it is truthy, within "
                                            "navigation_timeout; one that throws fails the capture (write "
                                            "`window.app && app.ready`).", max_length=10000)
    best_attempt: Bool = param(False, "Wait", "When a wait runs out (wait_until's events, wait_for_selector, "
                               "wait_for_expression), capture the page as it is and say so "
                               "(x-service-wait-timed-out, metadata.timings) instead of failing with "
                               "timeout_error.")

    # Request to the target
    user_agent: HeaderValue | None = param(None, "Request", "User-Agent header; a viewport_device overrides it.")
    headers: StrList = param([], "Request", "Extra headers, each `Name:Value`, for the url's origin only (with "
                             "html or markdown, every request the page makes); never sent across a redirect "
                             "to another origin.")
    cookies: StrList = param([], "Request", "Cookies, each `name=value; Domain=...; Path=...; Secure; "
                             "HttpOnly; SameSite=...`; without Domain, for the url's host.")
    authorization: HeaderValue | None = param(None, "Request", "Authorization header, sent to the url's origin "
                                      "only, never to third parties nor across a redirect to another origin.")
    time_zone: TimeZone | None = param(None, "Request", "IANA time zone id.")
    bypass_csp: Bool = param(False, "Request", "Bypass the page's Content-Security-Policy.")

    # Geolocation (all three)
    geolocation_latitude: float | None = param(None, "Geolocation", "Latitude.", ge=-90, le=90)
    geolocation_longitude: float | None = param(None, "Geolocation", "Longitude.", ge=-180, le=180)
    geolocation_accuracy: float | None = param(None, "Geolocation", "Accuracy in metres.", ge=0)

    # Proxy
    ip_country_code: CountryCode | None = param(None, "Proxy", "Use the proxy configured for this country.")
    proxy: ProxyUrl | None = param(None, "Proxy", "http://user:password@host:port/ to send the capture through.")
    proxy_bypass_hosts: HostPatterns = param([], "Proxy", "Hosts reached directly, not through `proxy` (or the "
                                        "ip_country_code proxy): `example.com`, `*.example.com` or `.example.com` "
                                        "(its subdomains); still under the network policy.")
    servers_region: str | None = param(None, "Proxy", "Render on the workers the operator labelled with this "
                                       "region (setting SCREENSHOT_REGIONS); omitted: any worker.",
                                       pattern=r"^[a-z0-9][a-z0-9-]{0,31}$")

    # Image post-processing
    image_quality: int = param(80, "Image", f"Quality 0-100 ({quality_formats()}; png: palette quantisation "
                               "when given).", ge=0, le=100)
    image_width: int | None = param(None, "Image", "Output width; aspect ratio kept (with both, fits inside).",
                                    shown_default="the capture's width", ge=1, le=65535)
    image_height: int | None = param(None, "Image", "Output height; aspect ratio kept.",
                                     shown_default="the capture's height", ge=1, le=65535)

    # PDF
    pdf_print_background: Bool = param(False, "PDF", "Print background graphics.")
    pdf_fit_one_page: Bool = param(False, "PDF", "Scale the page to fit one sheet.")
    pdf_landscape: Bool = param(False, "PDF", "Landscape sheets.")
    pdf_paper_format: PaperFormat = param("a4", "PDF", "Paper size.")
    pdf_margin: CssLength = param("0", "PDF", "Margin on all sides, CSS units.")
    pdf_margin_top: CssLength | None = param(None, "PDF", "Top margin, overrides pdf_margin.")
    pdf_margin_right: CssLength | None = param(None, "PDF", "Right margin, overrides pdf_margin.")
    pdf_margin_bottom: CssLength | None = param(None, "PDF", "Bottom margin, overrides pdf_margin.")
    pdf_margin_left: CssLength | None = param(None, "PDF", "Left margin, overrides pdf_margin.")
    pdf_width: CssLength | None = param(None, "PDF", "Custom sheet width (with pdf_height), CSS units.")
    pdf_height: CssLength | None = param(None, "PDF", "Custom sheet height (with pdf_width), CSS units.")
    pdf_prefer_css_page_size: Bool = param(False, "PDF", "The page's CSS @page size wins over the sheet's.")
    pdf_scale: float = param(1.0, "PDF", "Scale of the rendering, 0.1-2.", ge=0.1, le=2)
    pdf_page_ranges: PageRanges | None = param(None, "PDF", "Pages to print: 1-5, 8, 11-13.")
    pdf_header_template: PdfTemplate | None = param(None, "PDF", "HTML of each sheet's header; classes date, title, "
                                                    "url, pageNumber, totalPages get those values; inline styles "
                                                    "only.", max_length=16384)
    pdf_footer_template: PdfTemplate | None = param(None, "PDF", "HTML of each sheet's footer (as the header's).",
                                                    max_length=16384)
    pdf_tagged: Bool = param(False, "PDF", "Tagged (accessible) PDF: its structure tree.")
    pdf_outline: Bool = param(False, "PDF", "A document outline (bookmarks) from the headings; tags the PDF.")
    pdf_title: str | None = param(None, "PDF", "Document title (else the page's).", max_length=1000)
    pdf_author: str | None = param(None, "PDF", "Document author.", max_length=1000)
    pdf_subject: str | None = param(None, "PDF", "Document subject.", max_length=1000)
    pdf_keywords: str | None = param(None, "PDF", "Document keywords.", max_length=1000)
    pdf_a: Literal["1b", "2b", "3b"] | None = param(None, "PDF", "An archival PDF/A of this conformance level "
                                                    "(Ghostscript), fonts embedded, colours in sRGB.")
    pdf_user_password: PdfPassword | None = param(None, "PDF", "Encrypt (AES-256): the password to open it.")
    pdf_owner_password: PdfPassword | None = param(None, "PDF", "Encrypt: the password lifting pdf_permissions.")
    pdf_permissions: PdfPermissions | None = param(None, "PDF", "What an encrypted PDF allows without its owner "
                                                   "password (default: everything).")

    # Cache
    cache: Bool = param(False, "Cache", "Serve from and store in the cache.")
    cache_ttl: int | None = param(None, "Cache", "Seconds a cached result lives (14400-2592000).",
                                  ge=CACHE_TTL_MIN, le=CACHE_TTL_MAX)
    cache_key: str | None = param(None, "Cache", "Distinguishes cached versions.")
    cache_stale_ttl: int | None = param(None, "Cache", "Seconds past cache_ttl an expired result is still "
                                        "served, at once, while one request refreshes it.", ge=0, le=CACHE_TTL_MAX)

    # Async and webhooks
    async_: Bool = param(False, "Async", "Answer 202 at once; the result goes to the webhook.",
                         alias="async")
    webhook_url: HttpUrl | None = param(None, "Async", "URL receiving a POST with the result.")
    webhook_sign: Bool = param(True, "Async", "Sign the webhook body (X-Service-Signature).")
    webhook_errors: Bool = param(False, "Async", "Deliver failures to the webhook too.")
    external_identifier: HeaderValue | None = param(None, "Async", "Echoed in x-service-external-identifier.",
                                            max_length=256)

    # Your own storage (the hosted API's `store`)
    store: Bool = param(False, "Storage", "Upload the result to your S3-compatible bucket with your "
                        "credentials (storage_*); the key and bucket come back in x-service-store-key and "
                        "x-service-store-bucket.")
    storage_path: StorageKey | None = param(None, "Storage", "Object key without extension (the format's is "
                                     "added); placeholders {reference}, {domain}, {date}, {year}, {month}, "
                                     "{day}, {hour}, {minute}, {second}, {timestamp}.", max_length=1000)
    storage_bucket: str | None = param(None, "Storage", "Your bucket.",
                                       pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
    storage_endpoint: StoreEndpoint | None = param(None, "Storage", "Your S3-compatible endpoint "
                                         "(https://<account>.r2.cloudflarestorage.com, a MinIO URL); "
                                         "under the network policy.", shown_default="Amazon S3")
    storage_access_key_id: str | None = param(None, "Storage", "Your access key id; never stored.",
                                              max_length=256)
    storage_secret_access_key: str | None = param(None, "Storage", "Your secret access key; never stored.",
                                                  max_length=256)
    storage_class: str | None = param(None, "Storage", "Object storage class (STANDARD, STANDARD_IA, ...).",
                                      pattern=r"^[A-Z_]{1,40}$")
    storage_acl: Literal["private", "public-read", "public-read-write", "authenticated-read",
                         "aws-exec-read", "bucket-owner-read", "bucket-owner-full-control"] | None = param(
        None, "Storage", "Canned ACL of the object.")
    storage_return_location: Bool = param(False, "Storage", "Return the object's URL: `store.location` in "
                                          "the JSON body and x-service-store-location.")

    # Metadata
    metadata_image_size: Bool = param(False, "Metadata", "Output image width and height.")
    metadata_page_title: Bool = param(False, "Metadata", "The page title.")
    metadata_open_graph: Bool = param(False, "Metadata", "All og:* properties.")
    metadata_icon: Bool = param(False, "Metadata", "The page's best icon.")
    metadata_fonts: Bool = param(False, "Metadata", "Font families the page rendered with.")
    metadata_content: Bool = param(False, "Metadata", "Upload the page content; URL returned.")
    metadata_content_format: Literal["html", "markdown"] = param("html", "Metadata",
                                                                 "Format of metadata_content.")
    markdown_content: Literal["visible", "main"] = param("visible", "Metadata", "Markdown of everything visible, "
                                                         "or of the main content alone (the article).")
    metadata_http_response_status_code: Bool = param(False, "Metadata", "Main document's status code.")
    metadata_http_response_headers: Bool = param(False, "Metadata", "Main document's headers.")
    metadata_accessibility: Bool = param(False, "Metadata", "The accessibility tree (Playwright's ARIA snapshot, "
                                         "of `selector`'s element when given): metadata.accessibility, stored at "
                                         "accessibility.url / x-service-accessibility-url; format=aria alone.")
    metadata_quality: Bool = param(False, "Metadata", "Flags in metadata.quality and x-service-quality: blank, "
                                   "bot_challenge, http_error (4xx/5xx), consent_wall (a banner still covers the "
                                   "page), pending_requests (in flight at the capture and 0.5 s later).")
    metadata_console: Bool = param(False, "Metadata", "The page's console messages and uncaught exceptions "
                                   "(type, text, source location, time): metadata.console; the number of errors "
                                   "in x-service-console-errors.")
    metadata_timings: Bool = param(False, "Metadata", "How long each stage took and what the capture waited for "
                                   "(load, network idle, selector, expression, delay, best attempt): "
                                   "metadata.timings. The Server-Timing header has them on every capture.")

    # Evidence
    har: Bool = param(False, "Evidence", "Record the page's traffic as HAR 1.2 (every request with its headers, "
                      "timings and answer), stored beside the result: har.url, x-service-har-url. Your cookies, "
                      "authorization, headers and credentials show as [redacted]; at most SCREENSHOT_HAR_MAX_BYTES.")
    har_content: Literal["omit", "embed"] = param("omit", "Evidence", "embed: the answers' bodies in the HAR "
                                                  "too (text as it is, the rest base64), largest left out first "
                                                  "when it would pass the size bound.")
    archive: Bool = param(False, "Evidence", "The page as it was loaded for this capture, as a signed web archive "
                          "(WACZ 1.1.1: every request and answer as WARC records, the screenshot, an index and a page "
                          "list) that ReplayWeb.page and pywb replay, stored beside the result: archive.url, "
                          "x-service-archive-url. Image and PDF formats; format=wacz answers the archive itself. "
                          "Your cookies, authorization, headers and credentials show as [redacted]; at most "
                          "SCREENSHOT_ARCHIVE_MAX_BYTES of bodies "
                          "(x-service-archive-truncated says how many were left out).")
    certify: Bool = param(False, "Evidence", "A manifest of the capture (every artefact's SHA-256, the options "
                          "without secrets, URLs, status, UTC times, versions) signed with the service's Ed25519 "
                          "key: certificate.url, x-service-certificate-url; `screenshot-service verify` checks it.")

    # Error control
    ignore_host_errors: Bool = param(False, "Errors", "Capture even when the target answers non-2xx.")
    fail_if_content_contains: StrList = param([], "Errors", "Fail if the body contains any of these.")
    fail_if_content_missing: StrList = param([], "Errors", "Fail if the body contains none of these.")
    fail_if_request_failed: str | None = param(None, "Errors", "Fail if a request matching this URL "
                                               "pattern fails.")
    fail_on_console_errors: Bool = param(False, "Errors", "Fail (console_errors) when the page calls "
                                         "console.error or throws an exception it does not catch.")
    fail_on_resource_status: ResourceStatuses = param(
        [], "Errors", "Fail (resource_failed) when a subresource (image, script, style sheet, frame, fetch) "
        "answers one of these statuses or classes: `404`, `5xx`.")
    fail_on_resource_load_failure: Bool = param(False, "Errors", "Fail (resource_failed) when a subresource "
                                                "does not load at all (connection, DNS, TLS, the network "
                                                "policy); requests the page cancels or blocking refuses do not "
                                                "count.")
    request_gpu_rendering: Bool = param(False, "Errors", "Render on a GPU where a worker has one; this build's "
                                        "workers render in software, which is what the capture falls back to "
                                        "(x-service-gpu-rendering: software) unless fail_if_gpu_rendering_fails.")
    fail_if_gpu_rendering_fails: Bool = param(False, "Errors", "Fail instead of rendering in software; "
                                              "this server has no GPU, so it always fails.")

    # AI vision
    vision_provider_api_key: ApiKey | None = param(None, "Vision", "Your key for the vision provider; "
                                                "never stored.")
    vision_prompt: str | None = param(None, "Vision", "Prompt sent with the image.")
    vision_max_tokens: int | None = param(None, "Vision", "Completion length limit.", ge=1, le=16384)
    vision_response_schema: JsonSchema | None = param(None, "Vision", "A JSON Schema the completion must follow "
                                                      "(structured output); checked before it is returned.")

    # Effects
    watermark: str | None = param(None, "Effects", "Watermark text, bottom right (white with a dark halo).",
                                  max_length=200)
    watermark_image_url: HttpUrl | None = param(None, "Effects", "Watermark image (http/https, fetched under the "
                                            "network policy; at most 10 MB, shrunk to a quarter of the "
                                            "output), bottom right above the text.")
    watermark_opacity: float = param(0.5, "Effects", "Watermark opacity, 0 to 1.", ge=0, le=1)
    blur: StrList = param([], "Effects", "Selectors of elements pixelated and blurred in the output image "
                          "(in pixels, so no page style can undo it).")

    @model_validator(mode="after")
    def _cross_field_rules(self) -> TakeOptions:
        problems = list(self._cross_field_problems())
        if problems:
            raise CrossFieldError(problems)
        return self

    def _cross_field_problems(self) -> list[ErrorDetail]:
        return take_problems(self)

    # --- derived values used by the renderer ---------------------------------------------------

    @property
    def viewport(self) -> Viewport:
        """The effective viewport: preset first, then explicit parameters."""
        return resolve_viewport(
            device=self.viewport_device, width=self.viewport_width, height=self.viewport_height,
            scale=self.device_scale_factor, mobile=self.viewport_mobile, touch=self.viewport_has_touch,
            landscape=self.viewport_landscape, user_agent=self.user_agent,
        )

    @property
    def output_format(self) -> OutputFormat:
        """The facts of the requested format (render.contract.formats)."""
        return output_format(self.format)

    @property
    def recorded(self) -> bool:
        """The page's traffic is kept for a web archive: `archive=true`, or `format=wacz`."""
        return self.archive or self.format == "wacz"

    @property
    def heavy(self) -> bool:
        """Expected to take several times a viewport capture: a full page, a PDF, an archive, a delay or a vision
        provider's answer. Its client waits for it as for any capture; the hand-off lets quick captures that
        come after it go first for a while (render.queue.lane_scripts.HEAVY)."""
        return (self.full_page or self.format == "pdf" or self.recorded or self.delay > 0
                or self.vision_provider_api_key is not None)

    @property
    def file_extension(self) -> str:
        """Extension for stored objects and downloads."""
        return self.output_format.extension

    def to_payload(self) -> dict[str, Any]:
        """JSON-safe form for the queue: only what the caller set, so defaults stay the model's. Never the
        vision request (the key, and the prompt that may hold the caller's own data), as the queue lives in
        Redis: it travels sealed (render.contract.sealing.seal_job)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude=set(VISION_FIELDS))


def parse_take_options(params: dict[str, Any]) -> TakeOptions:
    """Validate raw `/take` parameters or raise `RequestNotValid` listing every problem."""
    return validate_all(TakeOptions, params)
