"""Blur and watermarks on images, by pyvips."""

from __future__ import annotations

import pyvips

from render.output.effects import blur, watermark


def text_image() -> pyvips.Image:
    """Black text on white, 400x100: lots of high-frequency detail."""
    mask = pyvips.Image.text("Secret 1234 text here", font="Liberation Sans 28", dpi=72)
    canvas = mask.embed(10, 30, 400, 100).invert()  # white background, black glyphs
    return canvas.bandjoin([canvas, canvas]).copy(interpretation="srgb")


def detail(image: pyvips.Image) -> float:
    """Mean absolute Laplacian: how much fine detail (edges of glyphs) there is."""
    laplacian = pyvips.Image.new_from_array([[0, -1, 0], [-1, 4, -1], [0, -1, 0]])
    return float(image.colourspace("b-w").cast("float").conv(laplacian, precision="float").abs().avg())


def test_blur_removes_the_detail_of_text_under_it_and_nothing_else() -> None:
    original = text_image()
    blurred = blur([(0, 0, 200, 100)])(original)
    assert (blurred.width, blurred.height, blurred.bands) == (400, 100, 3)
    assert detail(original.crop(0, 0, 200, 100)) > 5
    # 95% of the fine detail is gone (what is left is rounding noise on smooth gradients).
    assert detail(blurred.crop(0, 0, 200, 100)) < detail(original.crop(0, 0, 200, 100)) * 0.05
    assert (blurred.crop(200, 0, 200, 100) == original.crop(200, 0, 200, 100)).min() == 255  # untouched


def test_blur_boxes_outside_the_image_are_clipped() -> None:
    image = text_image()
    assert blur([(350, 80, 500, 500), (-50, -50, 10, 10)])(image).width == 400


def test_text_watermark_lands_bottom_right_with_its_opacity() -> None:
    base = pyvips.Image.black(400, 300, bands=3).copy(interpretation="srgb") + [0, 0, 255]
    faint = watermark("Draft", None, 0.3)(base)
    strong = watermark("Draft", None, 1.0)(base)
    assert faint.bands == 3
    assert strong.crop(0, 0, 200, 150).max() == 255 and strong.crop(0, 0, 200, 150)[0].max() == 0  # top-left blue
    corner = strong.crop(250, 230, 150, 70)
    assert corner[0].max() == 255  # white text appeared at the bottom right
    assert faint.crop(250, 230, 150, 70)[0].max() < 255 * 0.5  # more see-through


def test_image_watermark_is_shrunk_and_placed_above_the_text() -> None:
    base = pyvips.Image.black(400, 400, bands=3).copy(interpretation="srgb")
    picture = (pyvips.Image.black(1000, 1000, bands=3) + [0, 255, 0]).cast("uchar").pngsave_buffer()
    marked = watermark("Text", picture, 1.0)(base)
    green = (marked[1] > 200) & (marked[0] < 50)  # the picture, not the white text
    left, top, width, height = green.find_trim(threshold=0, background=[0])
    assert width <= 100 and height <= 100  # a quarter of the image at most
    assert left + width > 350 and top + height < 400 - 20  # bottom right, above the text line
