"""Every output format, declared once with its facts: what it is, its MIME type and file extension, the
largest image side it holds, whether Chromium encodes it itself, whether a vision provider takes it as
input, whether `image_quality` shapes it. The options models, the capture pipeline, the image encoder,
vision, storage keys and OpenAPI all read these facts here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["image", "document", "video"]


@dataclass(frozen=True)
class OutputFormat:
    """One value of `format`."""

    name: str  # as a request names it ("jpg")
    kind: Kind
    media_type: str  # Content-Type of the bytes
    extension: str  # of stored objects and downloads, without the dot
    max_side: int | None = None  # images: the largest width or height the format holds
    chromium: str | None = None  # images Chromium encodes itself: CDP Page.captureScreenshot's format
    vision: bool = False  # a chat-completions provider takes it as image input (others are sent as PNG)
    quality: bool = False  # `image_quality` 0-100 shapes the encoding (png: only as a palette's quality)
    # The lowest encoder quality that still gives a recognisable picture. libvips refuses Q=0 (and then
    # encoded at its default, so 0 came out better than 1); TIFF's JPEG codec at Q=1 is a grey blur.
    min_quality: int = 1

    @property
    def bare_media_type(self) -> str:
        """The media type without parameters (OpenAPI's content keys)."""
        return self.media_type.split(";")[0]


_IMAGES = (
    OutputFormat("png", "image", "image/png", "png", 2**31 - 1, chromium="png", vision=True),
    OutputFormat("jpeg", "image", "image/jpeg", "jpg", 65535, chromium="jpeg", vision=True, quality=True),
    OutputFormat("jpg", "image", "image/jpeg", "jpg", 65535, chromium="jpeg", vision=True, quality=True),
    # Not encoded by Chromium: a fast PNG capture and libvips (effort 2) make the same size in less time.
    OutputFormat("webp", "image", "image/webp", "webp", 16383, vision=True, quality=True),
    OutputFormat("avif", "image", "image/avif", "avif", 16384, quality=True),
    OutputFormat("heif", "image", "image/heif", "heif", 16384, quality=True),
    OutputFormat("tiff", "image", "image/tiff", "tiff", 2**32 - 1, quality=True, min_quality=3),
    OutputFormat("jp2", "image", "image/jp2", "jp2", 2**32 - 1, quality=True),
    OutputFormat("gif", "image", "image/gif", "gif", 65535, vision=True),
)
_DOCUMENTS = (
    OutputFormat("pdf", "document", "application/pdf", "pdf"),
    OutputFormat("html", "document", "text/html; charset=utf-8", "html"),
    OutputFormat("markdown", "document", "text/markdown; charset=utf-8", "md"),
    # Playwright's ARIA snapshot of the page (render.output.accessibility): YAML, whose media type (RFC 9512)
    # is UTF-8 without a charset parameter.
    OutputFormat("aria", "document", "application/yaml", "yaml"),
    # The page as a signed web archive (render/output/wacz.py); `archive=true` stores the same beside another format.
    OutputFormat("wacz", "document", "application/wacz", "wacz"),
)
_VIDEOS = (  # /animate
    OutputFormat("mp4", "video", "video/mp4", "mp4"),
    OutputFormat("webm", "video", "video/webm", "webm"),
    OutputFormat("gif", "video", "image/gif", "gif"),
    OutputFormat("mov", "video", "video/quicktime", "mov"),
    OutputFormat("avi", "video", "video/x-msvideo", "avi"),
)

FORMATS: dict[str, OutputFormat] = {f.name: f for f in (*_IMAGES, *_DOCUMENTS)}  # /take's
VIDEO_FORMATS: dict[str, OutputFormat] = {f.name: f for f in _VIDEOS}  # /animate's
IMAGE_FORMATS: frozenset[str] = frozenset(f.name for f in _IMAGES)

IMAGE_NAMES = tuple(f.name for f in _IMAGES)
DOCUMENT_NAMES = tuple(f.name for f in _DOCUMENTS)
VIDEO_NAMES = tuple(f.name for f in _VIDEOS)
ImageFormat = Literal[IMAGE_NAMES]  # type: ignore[valid-type]
Format = Literal[IMAGE_NAMES + DOCUMENT_NAMES]  # type: ignore[valid-type]
VideoFormat = Literal[VIDEO_NAMES]  # type: ignore[valid-type]


def quality_formats() -> str:
    """The formats `image_quality` shapes, one name per media type ("jpeg, webp, ...")."""
    names: dict[str, str] = {}
    for f in _IMAGES:
        if f.quality:
            names.setdefault(f.media_type, f.name)
    return ", ".join(names.values())


def output_format(name: str) -> OutputFormat:
    """The facts of a `/take` format, or of an `/animate` one."""
    return FORMATS.get(name) or VIDEO_FORMATS[name]


def media_types(kind: Kind) -> list[str]:
    """The distinct media types of one kind: the first format's, then the others sorted (OpenAPI's order)."""
    formats = {"image": _IMAGES, "document": _DOCUMENTS, "video": _VIDEOS}[kind]
    first = formats[0].bare_media_type
    return [first, *sorted({f.bare_media_type for f in formats} - {first})]



def register_media_types() -> None:
    """Teach Python's `mimetypes` every format's extension (`.md`, `.avif`, `.jp2`, ...): a backend that knows an
    object only by its key (local storage) names its content type from the registry, not from a table of its own."""
    import mimetypes

    for fmt in FORMATS.values():
        mimetypes.add_type(fmt.media_type, f".{fmt.extension}")
