"""Pages made for the capture-control tests: each shows its state as colours at known points
or as text in the DOM, so a test can read the outcome from the output."""

from __future__ import annotations

import time
from typing import Any

import pyvips

WHITE, RED, GREEN, BLUE = (255, 255, 255), (255, 0, 0), (0, 255, 0), (0, 0, 255)
YELLOW, CYAN, MAGENTA, GREY = (255, 255, 0), (0, 255, 255), (255, 0, 255), (136, 136, 136)

# Colours from media features; time zone and geolocation written into #state.
EMULATION = """<!DOCTYPE html><html><head><style>
body { margin: 0; background: #ffffff; }
@media (prefers-color-scheme: dark) { body { background: #000000; } }
#motion { width: 50px; height: 50px; background: #ff0000; }
@media (prefers-reduced-motion: reduce) { #motion { background: #00ff00; } }
#print { width: 50px; height: 50px; background: #0000ff; }
@media print { #print { background: #ffff00; } }
</style></head><body><div id="motion"></div><div id="print"></div><pre id="state"></pre><script>
const state = {tz: Intl.DateTimeFormat().resolvedOptions().timeZone, offset: new Date(2026, 0, 1).getTimezoneOffset()};
const show = () => { document.getElementById('state').textContent = JSON.stringify(state); };
show();
navigator.geolocation.getCurrentPosition(
  p => { Object.assign(state, {lat: p.coords.latitude, lon: p.coords.longitude, acc: p.coords.accuracy}); done(); },
  e => { state.geoError = e.message; done(); });
function done() { show(); const d = document.createElement('div'); d.id = 'geo-done'; document.body.appendChild(d); }
</script></body></html>"""

# On 127.0.0.1; its image comes from localhost, another origin (a "third party").
REQUEST = """<!DOCTYPE html><html><body><img src="http://localhost:{port}/third-party.png">
<p>request page</p></body></html>"""

# The CSP forbids inline scripts: the body turns green only when the CSP is bypassed.
CSP = """<!DOCTYPE html><html><body style="margin:0;background:#ff0000">
<script>document.body.style.background = '#00ff00';</script></body></html>"""

# A red .ad above a blue #target, styled only from its own origin: the site's policy refuses inline styles.
STRICT_STYLES = """<!DOCTYPE html><html><head><link rel="stylesheet" href="/strict.css"></head>
<body style="margin:0"><div class="ad"></div><div id="target"></div></body></html>"""

# Metadata of every kind: a non-ASCII title, og:* (one property twice), three icons (the 180 px one is
# best), text in Liberation Serif and Liberation Mono and an emoji (drawn with Noto Color Emoji).
METADATA = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>Café ☕ — Ünïcode, 100%</title>
<meta property="og:title" content="Ünïcode title"><meta property="og:type" content="article">
<meta property="og:image" content="https://publisher.test/a.png"><meta property="og:image" content="/b.png">
<meta name="description" content="not open graph">
<link rel="icon" href="/favicon-16.png" sizes="16x16"><link rel="icon" href="/favicon-32.png" sizes="32x32">
<link rel="apple-touch-icon" href="/apple-touch-icon.png" sizes="180x180">
</head><body style="font-family: 'Liberation Serif'"><h1>Heading</h1><p>Serif text ☕</p>
<code style="font-family: 'Liberation Mono'">mono</code></body></html>"""

# For blur: big text in #secret (top 100 px), other text in #public (150-250), a shadow root's text below.
BLUR = """<!DOCTYPE html><html><body style="margin:0;font: 40px 'Liberation Sans'">
<div id="secret" style="height:100px">Secret 4242 abc</div><div style="height:50px"></div>
<div id="public" style="height:100px">Public 1234 xyz</div><div id="host"></div>
<script>document.getElementById('host').attachShadow({mode: 'open'}).innerHTML =
  '<div class="inner-secret" style="height:50px">Hidden 99</div>';</script></body></html>"""

# Rows of 100 px: .ad red, #target blue, #btn, #hov grey (green on hover), a shadow host, #late later.
PREPARE = """<!DOCTYPE html><html><head><style>
body { margin: 0; } div, button { display: block; height: 100px; width: 300px; border: 0; margin: 0; padding: 0; }
.ad { background: #ff0000; } #target { background: #0000ff; } #btn { background: #ffffff; }
#hov { background: #888888; } #hov:hover { background: #00ff00; }
</style></head><body><div class="ad"></div><div id="target"></div>
<button id="btn" onclick="document.getElementById('target').style.background = '#00ff00'">go</button>
<div id="hov"></div><div id="host"></div><script>
const root = document.getElementById('host').attachShadow({mode: 'open'});
root.innerHTML = '<button class="inner" style="display:block;width:300px;height:100px;border:0">in shadow</button>';
root.querySelector('.inner').addEventListener('click',
  () => { document.getElementById('target').style.background = '#ffff00'; });
setTimeout(() => { const d = document.createElement('p'); d.id = 'late'; d.textContent = 'arrived late';
  document.body.appendChild(d); }, 800);
</script></body></html>"""

# A blue #box at (100, 1500) 200x100, a tall #big (red to green), a cyan element in a shadow root,
# and a fixed magenta header (40 px) over everything.
ELEMENTS = """<!DOCTYPE html><html><body style="margin:0;height:3000px">
<div id="box" style="position:absolute;left:100px;top:1500px;width:200px;height:100px;background:#0000ff"></div>
<div id="big" style="position:absolute;left:0;top:2000px;width:300px;height:900px;
  background:linear-gradient(#ff0000 0, #ff0000 50%, #00ff00 50%, #00ff00 100%)"></div>
<div id="shadowhost" style="position:absolute;left:0;top:300px"></div>
<header style="position:fixed;top:0;left:0;right:0;height:40px;background:#ff00ff"></header>
<script>const r = document.getElementById('shadowhost').attachShadow({mode: 'open'});
r.innerHTML = '<div class="deep" style="width:120px;height:60px;background:#00ffff"></div>';</script>
</body></html>"""


def band_colour(index: int) -> tuple[int, int, int]:
    """A colour unique to each 1000 px band of the tall page."""
    return (index * 8) % 256, 255 - (index * 8) % 256, 128


def bands(query: dict[str, list[str]]) -> str:
    height = int(query.get("height", ["30000"])[0])
    rows = "".join(f'<div style="height:1000px;background:rgb{band_colour(i)}"></div>' for i in range(height // 1000))
    return f"<!DOCTYPE html><html><body style='margin:0'>{rows}</body></html>"


# A sticky magenta header (60 px) on a 3000 px page, and a fixed cyan badge at the bottom right.
STICKY = """<!DOCTYPE html><html><body style="margin:0">
<header style="position:sticky;top:0;height:60px;background:#ff00ff"></header>
<div style="height:3000px;background:#ffffff"></div>
<div style="position:fixed;right:0;bottom:0;width:50px;height:50px;background:#00ffff"></div>
</body></html>"""

# Five grey blocks at 1500 px intervals; each turns green once it has been in view for 300 ms.
LAZY = """<!DOCTYPE html><html><head><style>body{margin:0} .block{position:absolute;left:0;width:300px;height:200px;
background:#888888}</style></head><body style="height:9000px">
<div class="block" style="top:1500px"></div><div class="block" style="top:3000px"></div>
<div class="block" style="top:4500px"></div><div class="block" style="top:6000px"></div>
<div class="block" style="top:7500px"></div><script>
const timers = new Map();
const observer = new IntersectionObserver(entries => { for (const e of entries) {
  if (e.isIntersecting) timers.set(e.target, setTimeout(() => { e.target.style.background = '#00ff00'; }, 300));
  else clearTimeout(timers.get(e.target));
}});
document.querySelectorAll('.block').forEach(b => observer.observe(b));
</script></body></html>"""

# What real lazy loaders do, each answered 150 ms late: native lazy images (left), images an intersection
# observer gives their `src` (middle), and blocks an observer fetches content for (right: green once the
# answer came). Everything is grey until loaded. A step waits at most the spec's 400 ms: 250 ms late, the last
# row came too late for it once under CI's load; 150 leaves the rest for a busy machine.
LAZY_LOADERS = """<!DOCTYPE html><html><head><style>body{margin:0;height:6000px} img,.fetched{position:absolute;
width:200px;height:200px;background:#888888}</style></head><body>""" + "".join(
    f'<img loading="lazy" src="/late.png?ms=150&n={top}" style="left:0;top:{top}px">'
    f'<img data-src="/late.png?ms=150&n={top}" style="left:300px;top:{top}px">'
    f'<div class="fetched" style="left:600px;top:{top}px"></div>' for top in (1500, 3000, 4500, 5700)) + """<script>
const observer = new IntersectionObserver((entries) => { for (const entry of entries) {
  if (!entry.isIntersecting) continue;
  const element = entry.target;
  observer.unobserve(element);
  if (element.dataset.src) element.src = element.dataset.src;
  else fetch('/slow?ms=150').then(() => { element.style.background = '#00ff00'; });
}});
document.querySelectorAll('img[data-src], .fetched').forEach((element) => observer.observe(element));
</script></body></html>"""

# Grows by 1000 px whenever the bottom comes within 1500 px of the viewport: it never ends.
INFINITE = """<!DOCTYPE html><html><body style="margin:0"><div id="feed"></div><script>
const feed = document.getElementById('feed'); let n = 0;
function more() { for (let i = 0; i < 2; i++) { const d = document.createElement('div');
  d.style.height = '500px'; d.style.background = n++ % 2 ? '#dddddd' : '#bbbbbb'; feed.appendChild(d); } }
more(); more(); more();
window.addEventListener('scroll', () => {
  if (window.scrollY + innerHeight > document.body.scrollHeight - 1500) more(); });
</script></body></html>"""

# Text for fail_if_content_*, and an image that answers 404 for fail_if_request_failed.
FAILING = """<!DOCTYPE html><html><body><h1>Welcome, Premium Member</h1>
<img src="/missing-image.png"></body></html>"""


# An ad image from an ad server, an element EasyList hides by id, content, a first-party image, a tracker
# script (EasyPrivacy's generic `/matomo.js` rule; google-analytics.com is HSTS-preloaded, so Chromium
# would upgrade it to https) and a style sheet: 50 px image row, red #ad_banner (50-150), green content (150-250),
# a red slot EasyList's generic `[data-ad-name]` hides (250-300).
ADS = """<!DOCTYPE html><html><head><link rel="stylesheet" href="/style.css"></head><body style="margin:0">
<img src="http://ad.doubleclick.net:{port}/banner.png" style="display:block;width:300px;height:50px">
<div id="ad_banner" style="height:100px;background:#ff0000"></div>
<div style="height:100px;background:#00ff00"></div>
<div data-ad-name="slot" style="height:50px;background:#ff0000"></div>
<img src="/logo.png" style="display:block;width:10px;height:10px">
<script src="/matomo.js"></script>
</body></html>"""
# A page at an address EasyList blocks as a frame (its generic `-ad.html` rule) but not as the page itself: green.
AD_ADDRESSED = """<!DOCTYPE html><html><body style="margin:0;background:#00ff00"></body></html>"""
# That page framed, on red: blocked, the frame shows no green.
AD_FRAMED = """<!DOCTYPE html><html><body style="margin:0;background:#ff0000">
<iframe src="/banner-ad.html" style="border:0;width:300px;height:300px"></iframe></body></html>"""
# 200x200 solid green, made once.
WATERMARK_PNG = (pyvips.Image.black(200, 200, bands=3) + [0, 255, 0]).cast("uchar").pngsave_buffer()
GIF = (b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x00\x00\x00\x00\x00,"
       b"\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")


# Tries to register a service worker and says how that went.
SERVICE_WORKER = """<!DOCTYPE html><html><body><pre id="state">pending</pre><script>
const show = (text) => { document.getElementById('state').textContent = text; };
if (!('serviceWorker' in navigator)) show('unavailable');
else navigator.serviceWorker.register('/sw.js').then(() => show('registered'), (e) => show('refused: ' + e.name));
</script></body></html>"""


def pages(port: int) -> dict[str, Any]:
    """Routes for these pages (the request page needs the site's port for its third-party image)."""

    def html(body: str) -> tuple[int, str, bytes]:
        return 200, "text/html; charset=utf-8", body.encode()

    return {
        "/emulation.html": lambda q: html(EMULATION),
        "/request.html": lambda q: html(REQUEST.replace("{port}", str(port))),
        "/third-party.png": lambda q: (200, "image/gif", b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"),
        "/echo": lambda q: (200, "application/json", b""),
        "/csp.html": lambda q: (*html(CSP), {"Content-Security-Policy": "script-src 'none'"}),
        "/prepare.html": lambda q: html(PREPARE),
        "/blur.html": lambda q: html(BLUR),
        "/watermark.png": lambda q: (200, "image/png", WATERMARK_PNG),
        "/metadata.html": lambda q: (*html(METADATA), {"X-Custom": "yes", "Cache-Control": "no-store"}),
        "/strict-styles.html": lambda q: (*html(STRICT_STYLES), {"Content-Security-Policy": "style-src 'self'"}),
        "/strict.css": lambda q: (200, "text/css", b".ad { height: 100px; background: #ff0000; } "
                                                   b"#target { height: 100px; background: #0000ff; }"),
        "/elements.html": lambda q: html(ELEMENTS),
        "/bands.html": lambda q: html(bands(q)),
        "/sticky.html": lambda q: html(STICKY),
        "/lazy.html": lambda q: html(LAZY),
        "/infinite.html": lambda q: html(INFINITE),
        "/lazy-loaders.html": lambda q: html(LAZY_LOADERS),
        "/late.png": lambda q: (time.sleep(int(q.get("ms", ["250"])[0]) / 1000), (200, "image/png", WATERMARK_PNG))[1],
        "/failing.html": lambda q: html(FAILING),
        "/missing-image.png": lambda q: (404, "text/plain", b"not here"),
        "/ads.html": lambda q: html(ADS.replace("{port}", str(port))),
        "/banner-ad.html": lambda q: html(AD_ADDRESSED),
        "/ad-framed.html": lambda q: html(AD_FRAMED),
        "/service-worker.html": lambda q: html(SERVICE_WORKER),
        "/sw.js": lambda q: (200, "application/javascript", b"self.addEventListener('fetch', () => {});"),
        "/download": lambda q: (200, "application/octet-stream", b"binary",
                                {"Content-Disposition": 'attachment; filename="file.bin"'}),
        "/banner.png": lambda q: (200, "image/gif", GIF),
        "/logo.png": lambda q: (200, "image/gif", GIF),
        "/matomo.js": lambda q: (200, "application/javascript", b"window.tracked = true;"),
        "/style.css": lambda q: (200, "text/css", b"body { color: #111; }"),
    }
