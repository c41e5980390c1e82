"""pyvips steps: sizes, limits, and every output format decoding back to what went in."""

from __future__ import annotations

import time

import pytest
import pyvips

from render.contract.errors import RequestNotValid, ResultingImageTooLarge
from render.output import imaging


def red_blue(width: int = 64, height: int = 48) -> pyvips.Image:
    """Left half red, right half blue."""
    left = (pyvips.Image.black(width // 2, height) + [255, 0, 0]).cast("uchar")
    right = (pyvips.Image.black(width - width // 2, height) + [0, 0, 255]).cast("uchar")
    return left.join(right, "horizontal").copy(interpretation="srgb")


@pytest.mark.parametrize(("size", "target", "expected"), [
    ((1280, 1024), (None, None), (1280, 1024)),
    ((1280, 1024), (640, None), (640, 512)),
    ((1280, 1024), (None, 256), (320, 256)),
    ((1280, 1024), (640, 100), (125, 100)),
    ((1000, 10), (3, None), (3, 1)),
], ids=["none", "width", "height", "fit-both", "never-zero"])
def test_fit_size_keeps_aspect_ratio(size: tuple[int, int], target: tuple, expected: tuple[int, int]) -> None:
    assert imaging.fit_size(*size, *target) == expected


@pytest.mark.parametrize(("width", "height", "fmt"), [
    (16384, 100, "webp"), (100, 70000, "jpeg"), (20000, 100, "avif"), (70000, 10, "gif"),
])
def test_formats_refuse_sizes_they_cannot_hold(width: int, height: int, fmt: str) -> None:
    with pytest.raises(ResultingImageTooLarge, match=fmt):
        imaging.check_output_size(width, height, fmt, max_pixels=10**12)


def test_pixel_budget_names_its_setting() -> None:
    with pytest.raises(ResultingImageTooLarge, match="SCREENSHOT_MAX_IMAGE_PIXELS"):
        imaging.check_output_size(10000, 10000, "png", max_pixels=50_000_000)


@pytest.mark.parametrize(("fmt", "loader"), [
    ("png", "pngload_buffer"), ("jpeg", "jpegload_buffer"), ("jpg", "jpegload_buffer"),
    ("webp", "webpload_buffer"), ("avif", "heifload_buffer"), ("heif", "heifload_buffer"),
    ("tiff", "tiffload_buffer"), ("jp2", "jp2kload_buffer"), ("gif", "gifload_buffer"),
])
def test_every_format_encodes_and_decodes_with_its_colours(fmt: str, loader: str) -> None:
    data = imaging.encode(red_blue(), imaging.EncodeOptions(fmt, 90))
    loaded = pyvips.Image.new_from_buffer(data, "")
    assert loaded.get("vips-loader") == loader
    # Decode once into memory: libvips 8.14's jp2 loader fails on a second region read.
    decoded = loaded.copy_memory()
    assert (decoded.width, decoded.height) == (64, 48)
    left = decoded.getpoint(8, 24)[:3]
    right = decoded.getpoint(56, 24)[:3]
    assert left[0] > 200 and left[2] < 60, left
    assert right[2] > 200 and right[0] < 60, right


def test_palette_png_is_smaller_and_indexed() -> None:
    image = (pyvips.Image.xyz(256, 256)[0].cast("uchar")).bandjoin(
        [pyvips.Image.xyz(256, 256)[1].cast("uchar"), pyvips.Image.black(256, 256).cast("uchar")])
    image = image.copy(interpretation="srgb")
    full = imaging.encode(image, imaging.EncodeOptions("png", 80))
    palette = imaging.encode(image, imaging.EncodeOptions("png", 20, palette=True))
    assert len(palette) < len(full)
    assert palette[25] == 3  # IHDR colour type 3: indexed colour


def test_resize_step_and_deadline() -> None:
    source = imaging.encode(red_blue(), imaging.EncodeOptions("png", 80))
    image = imaging.run_pipeline(imaging.decode(source), [imaging.resize(32, 24)], deadline=time.monotonic() + 10)
    assert (image.width, image.height) == (32, 24)
    from render.contract.errors import CaptureTimeout

    with pytest.raises(CaptureTimeout):
        imaging.run_pipeline(imaging.decode(source), [imaging.resize(32, 24)], deadline=time.monotonic() - 1)


def test_stitch_joins_slices_of_different_heights_without_padding() -> None:
    first = imaging.encode(red_blue(64, 48), imaging.EncodeOptions("png", 80))
    last = imaging.encode((pyvips.Image.black(64, 30) + [0, 255, 0]).cast("uchar").copy(interpretation="srgb"),
                          imaging.EncodeOptions("png", 80))
    # The last slice repeats 20 rows of an earlier view: they are skipped.
    stitched = imaging.stitch([(first, 0, 48), (last, 20, 10)]).copy_memory()
    assert (stitched.width, stitched.height) == (64, 58)
    assert [round(v) for v in stitched.getpoint(8, 10)[:3]] == [255, 0, 0]
    assert [round(v) for v in stitched.getpoint(8, 55)[:3]] == [0, 255, 0]


def gradient(width: int, height: int) -> pyvips.Image:
    """Each row a different grey: a band cut at the wrong row shows."""
    rows = pyvips.Image.xyz(width, height)[1] * 255 / max(1, height - 1)
    return rows.cast("uchar").bandjoin([rows.cast("uchar"), rows.cast("uchar")]).copy(interpretation="srgb")


@pytest.mark.parametrize(("height", "overlap", "bands"), [
    (1000, 100, [(0, 1000), (900, 1000), (1800, 1000), (2700, 300)]),
    (2000, 0, [(0, 2000), (2000, 1000)]),
    (4000, 0, [(0, 3000)]),
], ids=["overlap", "no-overlap", "one-band"])
def test_slices_are_cut_from_the_final_image_in_the_same_pass(height: int, overlap: int,
                                                               bands: list[tuple[int, int]]) -> None:
    slicing = imaging.Slicing(height, overlap)
    options = imaging.EncodeOptions("png", 80)
    body, width, full_height, slices = imaging.process(
        lambda: gradient(40, 3000), [imaging.resize(40, 3000)], options, time.monotonic() + 30, slicing)
    assert (width, full_height) == (40, 3000) and slicing.count(3000) == len(bands)
    assert [(piece.offset_y, piece.height) for piece in slices] == bands
    whole = pyvips.Image.new_from_buffer(body, "")
    for piece in slices:
        band = pyvips.Image.new_from_buffer(piece.body, "")
        assert (band.width, band.height) == (40, piece.height)
        assert (band - whole.crop(0, piece.offset_y, 40, piece.height)).abs().max() == 0
    _, _, _, none = imaging.process(lambda: gradient(40, 30), [], options, time.monotonic() + 30)
    assert none == []


def test_too_many_slices_are_refused_naming_the_field() -> None:
    with pytest.raises(RequestNotValid) as refused:
        imaging.process(lambda: gradient(10, 3000), [], imaging.EncodeOptions("png", 80),
                        time.monotonic() + 30, imaging.Slicing(1, 0))
    assert refused.value.details[0].field == "full_page_slice_height" and "3000 slices" in refused.value.message
    imaging.Slicing(6, 0).check(3000)  # 500 bands: the most a capture may store


def flat(width: int, height: int, colour: list[int]) -> pyvips.Image:
    return (pyvips.Image.black(width, height) + colour).cast("uchar").copy(interpretation="srgb")


@pytest.mark.parametrize("fmt", ["png", "jpeg", "webp"])
def test_one_colour_is_found_in_every_format_chromium_writes(fmt: str) -> None:
    """The blank-capture guard's test: a flat picture is one colour (lossy formats within the tolerance); one
    dot of another colour, anywhere, is not; a picture with an alpha band counts its alpha too."""
    grey = flat(300, 1000, [200, 200, 200])
    assert imaging.one_colour(bytes(grey.write_to_buffer(f".{fmt}"))) == (200, 200, 200)
    for y in (0, 500, 999):  # first strip, a middle one, the last row
        dotted = grey.draw_rect([20, 20, 20], 150, y, 4, 1, fill=True)
        assert imaging.one_colour(bytes(dotted.write_to_buffer(".png"))) is None, y
    half_clear = flat(10, 10, [255, 255, 255]).bandjoin(flat(10, 10, [255]).draw_rect([0], 0, 0, 10, 5, fill=True))
    assert imaging.one_colour(bytes(half_clear.write_to_buffer(".png"))) is None


def test_one_colour_stops_at_the_first_strip_that_shows_something(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tall picture with something in its first rows is judged from them, not decoded whole."""
    tall = flat(1280, 40000, [255, 255, 255]).draw_rect([0, 0, 0], 10, 10, 100, 20, fill=True)
    data = bytes(tall.write_to_buffer(".png", compression=1))
    reads: list[int] = []
    original = pyvips.Region.fetch

    def counted(self: pyvips.Region, x: int, y: int, width: int, height: int) -> bytes:
        reads.append(y)
        return original(self, x, y, width, height)

    monkeypatch.setattr(pyvips.Region, "fetch", counted)
    assert imaging.one_colour(data) is None
    assert reads == [0]
