"""The benchmark's pages, served by the test site (tests/support/site.py) at `/bench/...`: a simple page, the same
with ads (some answered slowly), a tall one for scroll recordings, full pages of any height and a heavy page (six web
fonts, nine photos)."""

from __future__ import annotations

import time
from pathlib import Path

from tests.support.site import ROUTES, Site, _html

SIMPLE_PAGE = """<!DOCTYPE html><html><head><title>Simple</title><style>
body { font-family: "Liberation Sans", sans-serif; margin: 40px; background: #f7f7fb; color: #222; }
header { background: #3b5bdb; color: white; padding: 24px; border-radius: 8px; }
.card { background: white; margin-top: 24px; padding: 24px; border-radius: 8px; box-shadow: 0 1px 3px #0002; }
</style></head><body><header><h1>Simple page</h1><p>A small local page for the benchmark.</p></header>
<div class="card"><h2>Section</h2><p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod
tempor incididunt ut labore et dolore magna aliqua.</p><ul><li>One</li><li>Two</li><li>Three</li></ul></div>
</body></html>"""

# The same page with 12 images, 3 of them ads by EasyList's rules (`/ads/728x90.`): for the cost of blocking,
# which only requests with a blocking option pay. The ads' paths are ones Debian's EasyList matches, so the
# scenario measures blocking, not only the interception.
ADS_PAGE = SIMPLE_PAGE.replace("</body>", "".join(
    f'<img src="/bench/img/{i}.gif" width="80" height="60">' for i in range(9)) + "".join(
    f'<img src="/ads/728x90.gif?n={i}" width="728" height="90">' for i in range(3)) + "</body>")
# The same, its ads answered after 300 ms, as a slow ad server's: blocking should make it cheaper.
SLOW_ADS_PAGE = ADS_PAGE.replace(".gif?n=", ".gif?ms=300&n=")
# A long page (the simple page's card 30 times) for the 5 s scroll recording.
TALL_PAGE = SIMPLE_PAGE.replace("</body>", SIMPLE_PAGE.split("<body>")[1].split("</body>")[0] * 30 + "</body>")


def full_page(height: int) -> str:
    """`height` px tall: blocks of 200 px in alternating colours, each with its number."""
    return ("<!DOCTYPE html><html><head><style>body{margin:0}div{height:200px}</style></head><body>"
            + "".join(f'<div style="background:hsl({(i * 37) % 360},60%,70%)">{i}</div>'
                      for i in range(height // 200))
            + "</body></html>")


FONTS = ["LiberationSerif-Regular", "LiberationSans-Bold", "LiberationMono-Regular", "LiberationSans-Italic",
         "LiberationSerif-Bold", "LiberationMono-Bold"]
HEAVY_IMAGES = 9
# The heavy page: six web fonts and nine 1000x700 JPEGs, about 3 MB in all.
HEAVY_PAGE = SIMPLE_PAGE.replace("</style>", "".join(
    f"@font-face {{ font-family: f{i}; src: url(/bench/font/{name}.ttf); }} .f{i} {{ font-family: f{i}; }}"
    for i, name in enumerate(FONTS)) + " img { width: 300px; height: 210px; }</style>").replace(
    "</body>", "".join(f'<p class="f{i}">Font {i}: The quick brown fox jumps over the lazy dog.</p>'
                       for i in range(len(FONTS)))
    + "".join(f'<img src="/bench/photo/{i}.jpg">' for i in range(HEAVY_IMAGES)) + "</body>")
GIF = (b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x00\x00\x00\x00\x00,"
       b"\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")

SITE_ADDRESS = "127.0.0.2"  # a loopback address of its own, so the service's allowlist opens only it


def _ad(query: dict[str, list[str]]) -> tuple[int, str, bytes]:
    """An ad image, after `ms` milliseconds (the site serves each request on a thread of its own)."""
    time.sleep(int(query.get("ms", ["0"])[0]) / 1000)
    return 200, "image/gif", GIF


def serve_bench_pages() -> None:
    """The benchmark's pages, added to the test site's routes."""
    import pyvips

    ROUTES["/bench/simple.html"] = lambda query: _html(SIMPLE_PAGE)
    ROUTES["/bench/ads.html"] = lambda query: _html(ADS_PAGE)
    ROUTES["/bench/slow-ads.html"] = lambda query: _html(SLOW_ADS_PAGE)
    ROUTES["/bench/tall.html"] = lambda query: _html(TALL_PAGE)
    ROUTES["/bench/full.html"] = lambda query: _html(full_page(int(query.get("height", ["10000"])[0])))
    ROUTES["/bench/heavy.html"] = lambda query: _html(HEAVY_PAGE)
    for i in range(9):
        ROUTES[f"/bench/img/{i}.gif"] = lambda query: (200, "image/gif", GIF)
    ROUTES["/ads/728x90.gif"] = _ad
    for i in range(HEAVY_IMAGES):  # noisy photos do not compress: about 150 KB each
        photo = pyvips.Image.gaussnoise(1000, 700, mean=128, sigma=40).bandjoin([
            pyvips.Image.gaussnoise(1000, 700, mean=100 + i * 8, sigma=30),
            pyvips.Image.gaussnoise(1000, 700, mean=90, sigma=50)]).cast("uchar")
        data = photo.jpegsave_buffer(Q=70)
        ROUTES[f"/bench/photo/{i}.jpg"] = lambda query, data=data: (200, "image/jpeg", data)
    for name in FONTS:
        font = Path(f"/usr/share/fonts/truetype/liberation/{name}.ttf").read_bytes()
        ROUTES[f"/bench/font/{name}.ttf"] = lambda query, font=font: (200, "font/ttf", font)




def simple_page_url() -> str:
    """The simple page alone on a test site of its own, started on a free loopback port: its URL (the tools that
    measure one page in this process: bench.hotpath, bench.browsers, bench.pagecost)."""
    ROUTES["/bench/simple.html"] = lambda query: _html(SIMPLE_PAGE)
    site = Site()
    site.thread.start()
    return site.url("/bench/simple.html")
