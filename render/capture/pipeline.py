"""One capture in a prepared tab: set up, load, prepare, check, and produce the requested output."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from playwright.async_api import Response

from render.browser.tabs import Tab
from render.capture import archiving, findings, fullpage, loading
from render.capture.archiving import ArchiveMaterial
from render.capture.pdf import print_pdf
from render.capture.regions import Region, region_for, scroll_into_view
from render.capture.screenshot import screenshot
from render.contract.errors import (
    ResultingImageTooLarge,
    ServiceError,
)
from render.contract.formats import FORMATS, IMAGE_FORMATS
from render.contract.options import TakeOptions
from render.contract.timings import Stopwatch
from render.net.egress import EgressProxy
from render.net.policy import NetworkPolicy, check_url
from render.output import effects, imaging, metadata
from render.output.accessibility import aria_snapshot
from render.page import archive, har, motion, preparation, quality, request_context, reveal
from render.page.archive import ArchiveRecorder
from render.page.blocking import FilterLists
from render.page.consent import RuleSet, consent_rule_set
from render.page.emulation import emulate, emulate_page
from render.page.failure_rules import FailedRequestWatch, check_content, check_gpu
from render.page.har import HarRecorder
from render.page.preparation import prepare, prepares
from render.page.quality import PENDING_GRACE_SECONDS, PendingRequests
from render.page.shield import Shield
from render.page.watch import PageWatch, watch
from render.settings import RenderSettings


@dataclass
class Output:
    """A finished capture."""

    body: bytes
    format: str
    content_type: str
    width: int | None = None
    height: int | None = None
    blocked_requests: int = 0  # connections the network policy refused
    metadata: dict[str, Any] = field(default_factory=dict)  # the JSON body's fields (render.output.metadata)
    # Stored beside the result, each linked by its name (metadata_content's "content", "accessibility"):
    # body, extension, content type.
    artefacts: dict[str, tuple[bytes, str, str]] = field(default_factory=dict)
    slices: list[imaging.Slice] = field(default_factory=list)  # full_page_slices, cut from the final image
    timings: Stopwatch = field(default_factory=Stopwatch)  # where the capture's time went
    provenance: Provenance | None = None  # what the page was, for certify
    archive: ArchiveMaterial | None = None  # archive=true: packed and signed by the worker (render.worker.finishing)


@dataclass(frozen=True)
class Provenance:
    """Where an output came from: the page's final URL, its main document's status and the Chromium that drew it."""

    final_url: str
    http_status: int | None
    chromium: str


@dataclass
class Environment:
    """What a capture runs with besides its tab: settings, the network policy and its proxy."""

    settings: RenderSettings
    policy: NetworkPolicy
    chrome_version: str  # the running Chromium's, "156.0.8078.79"
    egress: EgressProxy | None = None
    lists: FilterLists = field(default_factory=FilterLists)

    @property
    def consent_rules(self) -> RuleSet | None:
        """autoconsent as installed (render/page/consent.py), None when it is not."""
        return consent_rule_set(self.settings)


@dataclass
class LoadedPage:
    """A page loaded and prepared for one or more outputs."""

    response: Response | None
    watermark: bytes | None
    clock: Stopwatch
    watch: PageWatch | None = None
    har: HarRecorder | None = None
    pending: PendingRequests | None = None
    archive: ArchiveRecorder | None = None


async def capture(options: TakeOptions, tab: Tab, env: Environment, deadline: float) -> Output:
    """Run one capture; `deadline` is a `time.monotonic()` instant."""
    return await produce(options, tab, env, deadline, await open_page(options, tab, env, deadline))


async def capture_variants(variants: list[TakeOptions], tab: Tab, env: Environment, deadline: float
                           ) -> list[Output | ServiceError]:
    """Load the page of `variants[0]` once and derive each variant's output from it (bulk `optimize`:
    the variants differ only in output options). A variant's own failure does not stop the others."""
    loaded = await open_page(variants[0], tab, env, deadline)
    outputs: list[Output | ServiceError] = []
    for options in variants:
        try:
            check_viewport_size(options, env.settings)
            outputs.append(await produce(options, tab, env, deadline, loaded))
        except ServiceError as error:
            outputs.append(error)
    return outputs


async def open_page(options: TakeOptions, tab: Tab, env: Environment, deadline: float) -> LoadedPage:
    """Everything before the output: policy checks, emulation, loading, blocking, preparation, checks."""
    clock = Stopwatch()
    shield = Shield(options, env.lists, env.consent_rules)
    with clock.stage("preparation"):
        options, picture = await _before_load(options, tab, env)
        await shield.before_load(tab)
    failed_requests = FailedRequestWatch(tab, options.fail_if_request_failed)
    egress = env.egress
    page_watch = watch(tab, options, time.monotonic(), lambda host: next(
        (refusal.reason for refusal in egress.traffic(tab.listener).refusals if refusal.host == host), None)
        if egress else None)
    recorder = har.record(tab, options, env.settings.har_max_bytes)
    archiving = archive.record(tab, options)
    pending = quality.watch_pending(tab) if options.metadata_quality else None
    response = await loading.load(tab, options, env.egress, deadline, clock)
    with clock.stage("preparation"):
        await shield.after_load(tab, deadline)
    await _wait_until_shown(tab, env, deadline, clock)
    await prepare(tab, options, deadline, clock)
    if options.delay:
        with clock.stage("waits"):
            await asyncio.sleep(options.delay)
        clock.fired = clock.fired if clock.timed_out else "delay"
    with clock.stage("preparation"):
        if options.delay or prepares(options):
            await shield.after_preparation(tab, deadline)
        if options.reduce_motion:
            await motion.reduce(tab.page)
        await check_content(tab.page, options)
        failed_requests.check(options)
        if page_watch is not None:
            page_watch.check(options)
    return LoadedPage(response, picture, clock, page_watch, recorder, pending, archiving)


async def _before_load(options: TakeOptions, tab: Tab, env: Environment) -> tuple[TakeOptions, bytes | None]:
    """The checks, the egress and the emulation of a job, before its page loads: the options as the page is
    loaded with (credentials out of the URL) and the watermark's picture."""
    check_gpu(options)
    options = request_context.without_url_credentials(options)
    if env.egress is not None:
        env.egress.begin_job(await loading.upstream(options, env.policy), tab.listener)
    # Fetched first: a watermark that cannot be had fails the job before any rendering.
    picture = await effects.fetch_watermark(options.watermark_image_url, env.egress, tab.listener) if (
        options.watermark_image_url) else None
    if options.url is not None:
        await check_url("url", options.url, env.policy)
    check_viewport_size(options, env.settings)
    await emulate(tab, options.viewport, env.chrome_version)
    await emulate_page(tab, options)
    await request_context.apply(tab, options)
    return options, picture


async def produce(options: TakeOptions, tab: Tab, env: Environment, deadline: float, loaded: LoadedPage) -> Output:
    """The output `options` ask of a loaded page, with its metadata."""
    settings = env.settings
    clock = loaded.clock.copy()  # each output of the page goes on from its loading
    pending = loaded.pending.now() if loaded.pending is not None else []  # as the capture starts
    started = time.monotonic()
    blank = None
    if options.format == "wacz":  # the archive's screenshot first; the worker packs the archive around it
        output, blank = await _image_unless_blank(options.model_copy(update={"format": "png"}), tab, env, deadline,
                                                  loaded.watermark, clock)
    elif options.format in IMAGE_FORMATS:
        output, blank = await _image_unless_blank(options, tab, env, deadline, loaded.watermark, clock)
    else:
        with clock.stage("capture"):
            output = await _document(options, tab)
    if findings.wanted(options):
        with clock.stage("metadata"):
            still_pending = await loaded.pending.still_open(pending, started + PENDING_GRACE_SECONDS) if (
                loaded.pending is not None) else []
            output.metadata, output.artefacts = await findings.collect(
                options, tab, env.chrome_version, output.body, loaded.response, loaded.watch, loaded.har,
                still_pending)
    if options.recorded and loaded.archive is not None:  # bulk `optimize` loads a page for recorded outputs only
        with clock.stage("metadata"):
            output.archive = await archiving.material(options, tab, loaded.archive, output.body)
    if blank is not None and "quality" not in output.metadata:  # said even when metadata_quality was not asked
        output.metadata["quality"] = quality.report({"blank": blank})
    if options.format == "wacz":  # its body is the archive, packed by the worker (render.capture.archiving)
        output.body, output.format, output.content_type = b"", "wacz", FORMATS["wacz"].media_type
        output.width = output.height = None
    elif len(output.body) > settings.max_result_bytes:
        raise ResultingImageTooLarge(
            f"The result is {len(output.body)} bytes, over the limit of {settings.max_result_bytes} "
            "(setting SCREENSHOT_MAX_RESULT_BYTES).")
    if env.egress is not None:
        output.blocked_requests = sum(1 for refusal in env.egress.traffic(tab.listener).refusals
                                      if refusal.kind == "policy")
    output.timings = clock
    output.provenance = Provenance(tab.page.url, loaded.response.status if loaded.response else None,
                                   env.chrome_version)
    return output


async def _document(options: TakeOptions, tab: Tab) -> Output:
    """A PDF, the page's HTML, its Markdown or its ARIA snapshot."""
    if options.format == "pdf":
        return Output(await print_pdf(options, tab), "pdf", FORMATS["pdf"].media_type)
    if options.format == "html":
        return Output((await metadata.page_html(tab, options)).encode(), "html", FORMATS["html"].media_type)
    if options.format == "aria":
        return Output((await aria_snapshot(tab, options)).encode(), "aria", FORMATS["aria"].media_type)
    markdown = await metadata.page_markdown(tab, options)
    return Output(markdown.encode(), "markdown", FORMATS["markdown"].media_type)


async def _wait_until_shown(tab: Tab, env: Environment, deadline: float, clock: Stopwatch) -> None:
    """A page that hides itself, waited for (render.page.reveal): a wait when it hid, a check when it did not."""
    started = time.monotonic()
    waited = await reveal.wait_until_shown(tab, deadline, env.settings.hidden_page_wait)
    clock.add("preparation" if waited == 0 else "waits", time.monotonic() - started)


def _device_size(width: float, height: float, options: TakeOptions) -> tuple[int, int]:
    scale = options.viewport.scale
    return max(1, round(width * scale)), max(1, round(height * scale))


def check_viewport_size(options: TakeOptions, settings: RenderSettings) -> None:
    """Refuse a viewport capture too large for its format before rendering anything."""
    if options.format in IMAGE_FORMATS and not (options.full_page or options.selector or options.clip_x is not None):
        check_planned_size(options, *_device_size(options.viewport.width, options.viewport.height, options), settings)


def check_planned_size(options: TakeOptions, width: int, height: int, settings: RenderSettings) -> None:
    """Refuse before encoding (or loading) what the output format or the pixel budget cannot hold."""
    out_w, out_h = imaging.fit_size(width, height, options.image_width, options.image_height)
    imaging.check_output_size(out_w, out_h, options.format, settings.max_image_pixels)
    imaging.check_output_size(width, height, "png", settings.max_image_pixels)  # the capture itself


async def _image(options: TakeOptions, tab: Tab, settings: RenderSettings, deadline: float,
                 picture: bytes | None, clock: Stopwatch) -> Output:
    fmt = options.format
    palette = fmt == "png" and "image_quality" in options.model_fields_set
    encode_options = imaging.EncodeOptions(fmt, options.image_quality, palette=palette)
    scale = options.viewport.scale
    fast_final = settings.png_compression == "fast"  # for a result Chromium encodes (PNG; no effect on others)
    marks = ([effects.watermark(options.watermark, picture, options.watermark_opacity)]
             if options.watermark or picture is not None else [])
    if options.full_page:
        slicing = (imaging.Slicing(options.full_page_slice_height, options.full_page_slice_overlap_height)
                   if options.full_page_slices else None)
        native = FORMATS[fmt].chromium
        as_captured = (native is not None and not palette and not marks and not options.blur
                       and options.image_width is None and options.image_height is None)
        with clock.stage("capture"):
            sections, width, height = await fullpage.capture_sections(
                tab, options, options.viewport, settings.max_image_pixels, deadline,
                final_format=native if as_captured else None, fast_final=fast_final)
        check_planned_size(options, width, height, settings)
        if as_captured and len(sections) == 1:  # encoded once, by Chromium, like a viewport capture
            body = sections[0].image
            output = Output(body, fmt, FORMATS[fmt].media_type, *imaging.image_size(body))
            if slicing is not None:  # Chromium's encoding is the only form of this image: read once
                slicing.check(output.height or 0)
                with clock.stage("encode"):
                    output.slices = await asyncio.to_thread(
                        imaging.cut_slices, imaging.decode_whole(body), slicing, encode_options)
            return output
        target = imaging.fit_size(width, height, options.image_width, options.image_height)
        if slicing is not None:
            slicing.check(target[1])  # before the page is stitched or anything encoded
        parts = [(s.image, s.skip_rows, s.rows) for s in sections]
        blurs = await _blurs(tab, options, (0.0, 0.0), scale)
        with clock.stage("encode"):
            return await _encode(lambda: imaging.stitch(parts), [*blurs, imaging.resize(*target), *marks],
                                 encode_options, deadline, slicing)
    await scroll_into_view(tab.page, options)
    region = await region_for(tab.page, options)
    if region is not None:
        width, height = region.device_size(scale)
        check_planned_size(options, width, height, settings)
        origin = (region.x, region.y)
    else:
        width, height = _device_size(options.viewport.width, options.viewport.height, options)
        origin = (0.0, 0.0)
        if options.blur:
            scroll_x, scroll_y = await tab.page.evaluate("() => [scrollX, scrollY]")
            origin = (float(scroll_x), float(scroll_y))
    target = imaging.fit_size(width, height, options.image_width, options.image_height)
    blurs = await _blurs(tab, options, origin, scale)
    native = FORMATS[fmt].chromium
    if native is not None and target == (width, height) and not palette and not (blurs or marks):
        with clock.stage("capture"):
            body = await _shot(tab, region, native, options, fast=fast_final)
        actual_w, actual_h = imaging.image_size(body)
        return Output(body, fmt, FORMATS[fmt].media_type, actual_w, actual_h)
    # pyvips re-encodes anyway, so Chromium's PNG only needs to be fast, not small.
    with clock.stage("capture"):
        raw = await _shot(tab, region, "png", options, fast=True)
    with clock.stage("encode"):
        return await _encode(lambda: imaging.decode(raw), [*blurs, imaging.resize(*target), *marks],
                             encode_options, deadline)


async def _image_unless_blank(options: TakeOptions, tab: Tab, env: Environment, deadline: float,
                              picture: bytes | None, clock: Stopwatch) -> tuple[Output, dict[str, Any] | None]:
    """The image, guarded: a page or viewport capture all of one colour where the page lays out text or media
    is taken once more (after the page shows itself, if it hides again); still one colour, it comes with the
    `blank` quality flag's details (None: the image shows something, or the page has nothing to show)."""
    output = await _image(options, tab, env.settings, deadline, picture, clock)
    if options.selector or options.clip_x is not None:  # an element or area may well be one colour
        return output, None
    if await asyncio.to_thread(imaging.one_colour, output.body) is None:
        return output, None
    if not await quality.lays_out_content(tab, whole_page=bool(options.full_page)):
        return output, None
    await _wait_until_shown(tab, env, deadline, clock)
    output = await _image(options, tab, env.settings, deadline, picture, clock)
    colour = await asyncio.to_thread(imaging.one_colour, output.body)
    if colour is None:
        return output, None
    return output, {"reason": "the image is one colour where the page has text or media (taken twice)",
                    "colour": list(colour)}


async def _blurs(tab: Tab, options: TakeOptions, origin: tuple[float, float], scale: float) -> list[imaging.Step]:
    """The blur step for the boxes of `blur`'s elements, relative to the captured area's origin."""
    if not options.blur:
        return []
    for index, selector in enumerate(options.blur):  # refused by name, not a script error (a 500)
        await preparation.check_selector(tab.page, f"blur.{index}", selector)
    boxes = await effects.element_boxes(tab.page, options.blur)
    return [effects.blur(effects.to_image_pixels(boxes, origin, scale))] if boxes else []


async def _shot(tab: Tab, region: Region | None, fmt: str, options: TakeOptions, *, fast: bool) -> bytes:
    return await screenshot(tab, fmt, options.image_quality, fast=fast, transparent=options.omit_background,
                            clip=region.as_clip() if region else None,
                            beyond_viewport=region.beyond_viewport if region else False)


async def _encode(source: imaging.Source, steps: list[imaging.Step], encode_options: imaging.EncodeOptions,
                  deadline: float, slicing: imaging.Slicing | None = None) -> Output:
    # libvips work is CPU-bound: off the event loop, so the next tab's preparation keeps going.
    body, width, height, slices = await asyncio.to_thread(
        imaging.process, source, steps, encode_options, deadline, slicing)
    fmt = encode_options.format
    return Output(body, fmt, FORMATS[fmt].media_type, width, height, slices=slices)


def monotonic_deadline(unix_deadline: float) -> float:
    """Convert a wall-clock deadline from the queue into this process's monotonic clock."""
    return time.monotonic() + (unix_deadline - time.time())
