"""The format registry: each format once, and every place that needs a format's facts reads them there."""

from __future__ import annotations

from typing import get_args

import pytest

from animate.options import AnimateOptions
from render.contract import formats
from render.contract.options import TakeOptions, parse_take_options
from service.api import openapi


def test_the_models_offer_exactly_the_registered_formats() -> None:
    assert set(get_args(TakeOptions.model_fields["format"].annotation)) == set(formats.FORMATS)
    assert set(get_args(AnimateOptions.model_fields["format"].annotation)) == set(formats.VIDEO_FORMATS)
    assert formats.IMAGE_FORMATS == {name for name, f in formats.FORMATS.items() if f.kind == "image"}


@pytest.mark.parametrize("name", sorted(formats.FORMATS))
def test_a_requests_extension_and_type_come_from_the_registry(name: str) -> None:
    options = parse_take_options({"url": "https://example.com/", "format": name})
    assert options.file_extension == formats.FORMATS[name].extension
    assert options.output_format.media_type == formats.FORMATS[name].media_type


def test_the_facts_hold_together() -> None:
    for f in formats.FORMATS.values():
        assert (f.max_side is not None) == (f.kind == "image"), f.name
        assert f.chromium is None or f.kind == "image", f.name
        assert f.media_type.split("/")[0] in ("image", "application", "text"), f.name
    assert {f.name for f in formats.FORMATS.values() if f.chromium} == {"png", "jpeg", "jpg"}
    assert {f.name for f in formats.FORMATS.values() if f.vision} == {"png", "jpeg", "jpg", "webp", "gif"}
    assert formats.quality_formats() == "jpeg, webp, avif, heif, tiff, jp2"
    assert "(jpeg, webp, avif, heif, tiff, jp2;" in (TakeOptions.model_fields["image_quality"].description or "")


def test_openapi_lists_the_registered_media_types_default_first() -> None:
    assert formats.media_types("image")[0] == "image/png" and "image/jp2" in formats.media_types("image")
    assert formats.media_types("video")[0] == "video/mp4" and "image/gif" in formats.media_types("video")
    assert formats.media_types("document") == [
        "application/pdf", "application/wacz", "application/yaml", "text/html", "text/markdown"]
    answers = openapi.capture_responses("take")[200]["content"]
    assert set(answers) == {*formats.media_types("image"), *formats.media_types("document"), "application/json"}
    recordings = openapi.capture_responses("animate")[200]["content"]
    assert set(recordings) == {*formats.media_types("video"), "application/json"}


def test_a_format_s_media_type_is_written_only_in_the_registry() -> None:
    """Every other place reads the registry (the favicon's type by extension too): no product file names a
    registered format's media type itself."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    types = {f.bare_media_type for f in (*formats.FORMATS.values(), *formats.VIDEO_FORMATS.values())}
    types -= {"text/html"}  # also what the API's own pages are, which are no output
    found = []
    for package in ("render", "service", "animate", "storage"):
        for path in (root / package).rglob("*.py"):
            if path.name == "formats.py" and path.parent.name == "contract":
                continue
            text = path.read_text()
            found += [f"{path.relative_to(root)}: {t}" for t in types if f'"{t}' in text or f"'{t}" in text]
    assert found == []
