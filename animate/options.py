"""Every parameter of `/animate`: the `/take` parameters that make sense for a recording, plus the
animation parameters of the spec. Pure (no Playwright): the API validates with it."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import field_validator

from animate.easing import EasingName
from render.contract.errors import ErrorDetail
from render.contract.formats import VideoFormat
from render.contract.options import TakeOptions
from render.contract.validation import validate_all
from render.contract.values import HttpUrl, StrList, param

DURATION_MAX = 30
FPS = 30  # frame_rate's default
FPS_MAX = 60
_RATIO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*[:/x]\s*(\d+(?:\.\d+)?)\s*$")

# /take parameters that describe a still image, a document or its metadata: refused on /animate
# (naming the parameter) rather than ignored.
NOT_FOR_RECORDINGS = frozenset({
    "full_page", "full_page_scroll", "full_page_scroll_delay", "full_page_scroll_by", "full_page_max_height",
    "full_page_algorithm", "full_page_slices", "full_page_slice_height", "full_page_slice_overlap_height",
    "selector", "selector_algorithm", "selector_scroll_into_view",
    "error_on_selector_not_found", "capture_beyond_viewport", "clip_x", "clip_y", "clip_width", "clip_height",
    "image_quality", "image_width", "image_height", "pdf_print_background", "pdf_fit_one_page", "pdf_landscape",
    "pdf_paper_format", "pdf_margin", "pdf_margin_top", "pdf_margin_right", "pdf_margin_bottom",
    "pdf_margin_left", "pdf_width", "pdf_height", "pdf_prefer_css_page_size", "pdf_scale", "pdf_page_ranges",
    "pdf_header_template", "pdf_footer_template", "pdf_tagged", "pdf_outline", "pdf_title", "pdf_author",
    "pdf_subject", "pdf_keywords", "pdf_a", "pdf_user_password", "pdf_owner_password", "pdf_permissions",
    "metadata_image_size", "metadata_page_title", "metadata_open_graph", "metadata_icon",
    "metadata_fonts", "metadata_content", "metadata_content_format", "markdown_content",
    "metadata_http_response_status_code",
    "metadata_http_response_headers", "metadata_accessibility", "metadata_console", "metadata_quality",
    "metadata_timings", "certify", "har", "har_content", "archive", "vision_provider_api_key",
    "vision_prompt", "vision_max_tokens", "vision_response_schema",
    "watermark", "watermark_image_url", "watermark_opacity", "blur",
})


class AnimateOptions(TakeOptions):
    """`/take`'s model with a video `format` and the recording parameters."""

    job_kind: ClassVar[str] = "animate"

    format: VideoFormat = param("mp4", "Animation", "Video format: mp4 (H.264), webm (VP9), gif, mov "
                                "(ProRes 4444, with alpha when omit_background), avi (MPEG-4).")
    scenario: Literal["default", "scroll"] = param(
        "default", "Animation", "default: record the page after load; scroll: scroll it down (and back).")
    duration: int = param(5, "Animation", "Seconds recorded (1-30).", ge=1, le=DURATION_MAX)
    frame_rate: int = param(FPS, "Animation", "Frames per second of the video (1-60). scroll: every frame shows "
                            "the page where the easing puts it at that frame's time, however long a capture "
                            "takes (so 60 takes about twice as long to record as 30).", ge=1, le=FPS_MAX)
    width: int | None = param(None, "Animation", "Output width in pixels (default: the viewport's).",
                              shown_default="viewport", ge=16, le=7680)
    height: int | None = param(None, "Animation", "Output height in pixels (default: the viewport's).",
                               shown_default="viewport", ge=16, le=4320)
    aspect_ratio: str | None = param(None, "Animation", "Crop the viewport to this ratio, such as 16:9 or 1:1 "
                                     "(overrides width and height; no distortion).")
    scroll_delay: int = param(500, "Scroll", "Pause between scroll steps (ms).", ge=0, le=30000)
    scroll_duration: int = param(1500, "Scroll", "Length of one scroll step (ms).", ge=1, le=30000)
    scroll_by: int = param(1000, "Scroll", "Pixels one step scrolls.", ge=1, le=100000)
    scroll_start_immediately: bool = param(True, "Scroll", "Start scrolling at once.")
    scroll_start_delay: int = param(0, "Scroll", "Wait before the first step when not starting at once (ms).",
                                    ge=0, le=30000)
    scroll_back: bool = param(True, "Scroll", "Scroll back to the top after reaching the end.")
    scroll_back_algorithm: Literal["once", "repeat"] = param(
        "once", "Scroll", "once: one eased motion up; repeat: the scroll-down steps in reverse.")
    scroll_back_after_duration: int | None = param(None, "Scroll", "Start scrolling back at this time (ms) "
                                                   "even before the end.", ge=0, le=30000)
    scroll_complete: bool = param(True, "Scroll", "Stop recording when the scroll completes.")
    scroll_stop_after_duration: int | None = param(None, "Scroll", "Freeze scrolling at this time (ms).",
                                                   ge=0, le=30000)
    scroll_easing: EasingName = param("ease_in_out_quint", "Scroll", "Easing curve of each motion.")
    scroll_try_navigate: bool = param(False, "Scroll", "Navigate to another page of the site midway.")
    scroll_navigate_after: int | None = param(None, "Scroll", "When to navigate (ms).", shown_default="duration / 2",
                                              ge=0, le=30000)
    scroll_navigate_to_url: HttpUrl | None = param(None, "Scroll", "Where to navigate (default: a link matching "
                                               "the hints).")
    scroll_navigate_link_hints: StrList = param(["pricing", "about", "customers"], "Scroll",
                                                "Words a link's text or address may contain to be followed.")
    scroll_till_selector: str | None = param(None, "Scroll", "Scroll only until this element is at the top.")
    scroll_till_selector_adjust_top: int | None = param(None, "Scroll", "Pixels kept above that element.",
                                                        ge=-100000, le=100000)
    scroll_to_end_after: int | None = param(None, "Scroll", "At this time (ms), go to the end in one eased "
                                            "motion.", ge=0, le=30000)

    @field_validator("aspect_ratio")
    @classmethod
    def _ratio(cls, value: str | None) -> str | None:
        if value is None:
            return value
        match = _RATIO.match(value)
        if not match or float(match.group(1)) <= 0 or float(match.group(2)) <= 0:
            raise ValueError("must be two positive numbers such as 16:9, 4:3 or 1:1")
        return value

    def _cross_field_problems(self) -> list[ErrorDetail]:
        problems = [p for p in super()._cross_field_problems() if p.field != "omit_background"]
        fields = type(self).model_fields
        problems += [ErrorDetail(fields[name].alias or name, "does not apply to /animate")
                     for name in sorted(self.model_fields_set & NOT_FOR_RECORDINGS)]
        if self.omit_background and self.format != "mov":
            problems.append(ErrorDetail("omit_background", "needs format=mov (ProRes 4444 keeps the alpha)"))
        if self.scenario != "scroll":
            # Given at its default it changes nothing (generated clients send every default): not refused.
            scroll = sorted(name for name in self.model_fields_set & SCROLL_FIELDS
                            if getattr(self, name) != fields[name].default)
            problems += [ErrorDetail(name, "needs scenario=scroll") for name in scroll]
        if self.delay + self.duration >= self.timeout:
            problems.append(ErrorDetail("duration", f"with delay, must fit in timeout ({self.timeout} s); raise "
                                        "timeout"))
        return problems

    @property
    def heavy(self) -> bool:
        """A recording lasts its duration at least: always heavy (TakeOptions.heavy)."""
        return True

    @property
    def ratio(self) -> float | None:
        if self.aspect_ratio is None:
            return None
        match = _RATIO.match(self.aspect_ratio)
        assert match
        return float(match.group(1)) / float(match.group(2))

    @property
    def navigate_after_ms(self) -> int:
        return self.scroll_navigate_after if self.scroll_navigate_after is not None else self.duration * 500

    @property
    def content_type(self) -> str:
        return self.output_format.media_type


SCROLL_FIELDS = frozenset(name for name in AnimateOptions.model_fields
                          if name.startswith("scroll_") and name not in TakeOptions.model_fields)


def parse_animate_options(params: dict[str, Any]) -> AnimateOptions:
    """Validate raw `/animate` parameters or raise `RequestNotValid` listing every problem."""
    return validate_all(AnimateOptions, params)
