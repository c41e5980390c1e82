"""A page full of motion for `reduce_motion`: CSS animations finite and looping, a transition, a
Web Animation, an autoplaying video, a Swiper and a Bootstrap carousel with autoplay (the real libraries,
pinned in tests/consent/package.json and served from its node_modules), and a reveal-on-scroll effect at
the bottom. `?still=1` is the same page drawn still, as reduce_motion should leave it: finite motion at its
end, looping motion at its start, the video at its first frame, each slider at its first slide.

The video carries `disableremoteplayback`: Chromium draws a cast button of its own over a paused video without
controls in some captures and not in others (seen on the still page's first capture of a test run, 48x48 at the
video's corner, on a busy machine): browser UI, not the motion under test.
"""

from __future__ import annotations

import functools
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.support.pages.consent import LIBRARY_URL

SWIPER = LIBRARY_URL + "swiper/"
BOOTSTRAP = LIBRARY_URL + "bootstrap/dist/"
REVEAL_TOP = 2400  # CSS px: where the reveal-on-scroll box sits (a full-page capture reaches it)
VIDEO_BOX = (520, 10, 160, 90)  # CSS px: the video's left, top, width and height
CAROUSEL_BOX = (340, 380, 300, 120)  # CSS px: the Bootstrap carousel's

PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8">
<link rel="stylesheet" href="{swiper}swiper-bundle.min.css">
<link rel="stylesheet" href="{bootstrap}css/bootstrap.min.css">
<style>
body { margin: 0; background: #ffffff; height: 2700px; position: relative; }
.box { position: absolute; width: 80px; height: 80px; }
#finite { top: 10px; left: 0; background: #00c000; animation: slide 6s linear forwards; }
@keyframes slide { from { transform: translateX(0); background: #c00000; }
                   to { transform: translateX(400px); background: #00c000; } }
#spin { top: 110px; left: 0; background: linear-gradient(90deg, #0000ff 50%, #ffcc00 50%);
        animation: spin 1.5s linear infinite; }
@keyframes spin { to { transform: rotate(360deg); } }
#pulse { top: 110px; left: 120px; background: #ff00ff; animation: pulse 1s ease-in-out 0.2s infinite alternate; }
@keyframes pulse { from { opacity: 1; } to { opacity: 0.1; } }
#grow { top: 210px; left: 0; height: 40px; width: 20px; background: #008080; transition: width 8s linear; }
#grow.wide { width: 420px; }
#web { top: 270px; left: 0; background: #804000; }
#pref { top: 110px; left: 240px; background: #ff0000; }
@media (prefers-reduced-motion: reduce) { #pref { background: #00ff00; } }
video { position: absolute; top: {video_top}px; left: {video_left}px;
        width: {video_width}px; height: {video_height}px; }
.swiper { position: absolute; top: 380px; left: 0; width: 300px; height: 120px; }
.swiper-slide { height: 120px; }
#carousel { position: absolute; top: {carousel_top}px; left: {carousel_left}px; width: {carousel_width}px; }
.carousel-item div { height: {carousel_height}px; }
#reveal { top: {reveal_top}px; left: 0; width: 200px; height: 200px; background: #2040ff; }
#reveal.in { animation: rise 10s linear both; }
@keyframes rise { from { opacity: 0; transform: translateY(150px); } to { opacity: 1; transform: none; } }
{still_css}
{slides_css}
</style></head><body>
<div class="box" id="finite"></div><div class="box" id="spin"></div><div class="box" id="pulse"></div>
<div class="box" id="grow"></div><div class="box" id="web"></div><div class="box" id="pref"></div>
<video id="clip" src="/motion/clip.webm" muted playsinline preload="auto" disableremoteplayback {video_attrs}></video>
<div class="swiper"><div class="swiper-wrapper">
  <div class="swiper-slide" style="background:#e03030"></div>
  <div class="swiper-slide" style="background:#30a030"></div>
  <div class="swiper-slide" style="background:#3030e0"></div>
</div></div>
<div id="carousel" class="carousel slide" {carousel_attrs}><div class="carousel-inner">
  <div class="carousel-item active"><div style="background:#ffa000"></div></div>
  <div class="carousel-item"><div style="background:#00a0ff"></div></div>
  <div class="carousel-item"><div style="background:#a000ff"></div></div>
</div></div>
<div class="box" id="reveal"></div>
<script src="{swiper}swiper-bundle.min.js"></script>
<script src="{bootstrap}js/bootstrap.bundle.min.js"></script>
<script>
const still = {still};
const swiper = new Swiper('.swiper', still ? {} : {autoplay: {delay: 300}, speed: 250, rewind: true});
if (!still) {
  document.getElementById('grow').getBoundingClientRect();
  document.getElementById('grow').classList.add('wide');
  document.getElementById('web').animate([{transform: 'translateX(0)'}, {transform: 'translateX(300px)'}],
                                         {duration: 5000, fill: 'forwards'});
  new IntersectionObserver(entries => entries.forEach(entry => {
    if (entry.isIntersecting) entry.target.classList.add('in');
  })).observe(document.getElementById('reveal'));
}
const video = document.getElementById('clip');
const ready = () => { const mark = document.createElement('i'); mark.id = 'ready'; document.body.append(mark); };
if (video.readyState >= 2) ready(); else video.addEventListener('loadeddata', ready, {once: true});
</script></body></html>"""

# Drawn still: finite motion at its end, looping motion at its start.
STILL_CSS = """#finite, #spin, #pulse { animation: none; } #finite { transform: translateX(400px); }
#grow { width: 420px; transition: none; } #web { transform: translateX(300px); }"""


def page(still: bool, slow_slides: bool = False) -> bytes:
    """The page; `slow_slides`: the carousel's slides take 5 s each (Bootstrap's take 0.6 s), so a capture a second
    after load finds it in the middle of its first."""
    left, top, width, height = VIDEO_BOX
    carousel_left, carousel_top, carousel_width, carousel_height = CAROUSEL_BOX
    values = {"swiper": SWIPER, "bootstrap": BOOTSTRAP, "reveal_top": str(REVEAL_TOP),
              "video_left": str(left), "video_top": str(top), "video_width": str(width), "video_height": str(height),
              "carousel_left": str(carousel_left), "carousel_top": str(carousel_top),
              "carousel_width": str(carousel_width), "carousel_height": str(carousel_height),
              "slides_css": ".carousel-item { transition-duration: 5s; }" if slow_slides else "",
              "still_css": STILL_CSS if still else "", "still": "true" if still else "false",
              "video_attrs": "" if still else "autoplay loop",
              "carousel_attrs": "" if still else 'data-bs-ride="carousel" data-bs-interval="300"'}
    html = PAGE
    for name, value in values.items():
        html = html.replace("{" + name + "}", value)
    return html.encode()


@functools.cache
def clip() -> bytes:
    """Four seconds of ffmpeg's test pattern (a new picture every frame), VP8 in WebM."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "clip.webm"
        subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=160x90:rate=25:duration=4",
                        "-c:v", "libvpx", "-b:v", "300k", "-an", str(out)], check=True)
        return out.read_bytes()


def routes() -> dict[str, Any]:
    html = "text/html; charset=utf-8"
    return {"/motion/page.html": lambda q: (200, html, page(bool(q.get("still")), bool(q.get("slow_slides")))),
            "/motion/clip.webm": lambda q: (200, "video/webm", clip())}
