"""A site to archive and replay (tests/integration/test_archive_replay.py): what a real page's archive has to carry
for a replay tool to show it again with the site gone.

- `/start` answers 302 to `/page.html`, which is sent gzipped (when asked) with a `Set-Cookie`.
- The page uses a web font (Liberation Mono Bold from Debian's fonts-liberation, served as `/face.ttf`), shows a PNG
  and a JPEG drawn here, frames `/frame.html` from the HTTPS twin of the site (a certificate of the run's test CA),
  and renders what two `fetch`es answered: a GET of `/api/greeting` and a POST of JSON to `/api/echo`, whose answer
  depends on the body posted (a replay that matched the POST by URL alone would show the wrong text).
- When the texts are in and the font has loaded, it adds `#done`.

One server class serves both twins; `Replayable.requests` counts what each was asked, so a test can tell that the
replay asked nothing of them (they are stopped by then anyway).
"""

from __future__ import annotations

import gzip
import json
import ssl
import threading
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pyvips

FONT = Path("/usr/share/fonts/truetype/liberation/LiberationMono-Bold.ttf")
GREETING = "Hello from the archived GET"
ANSWERS = {"weather": "Sunny, said the archived POST", "tide": "High tide, said the archived POST"}

PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>Archived evening news</title>
<style>
@font-face {{ font-family: "Archived Face"; src: url("/face.ttf") format("truetype"); }}
body {{ margin: 0; font: 16px/1.4 "Liberation Serif", serif; background: #fdf6e3; color: #073642; }}
h1 {{ font: 34px "Archived Face", serif; margin: 0; padding: 16px 24px; background: #268bd2; color: #fff; }}
.row {{ display: flex; gap: 16px; padding: 16px 24px; }}
iframe {{ width: 260px; height: 120px; border: 0; }}
p {{ margin: 4px 24px; font-size: 20px; }}
</style></head><body>
<h1>Evening News 1977</h1>
<div class="row"><img src="/picture.png" width="160" height="120" alt="">
<img src="/picture.jpg?size=large" width="160" height="120" alt="">
<iframe src="{frame}"></iframe></div>
<p id="got">…</p><p id="posted">…</p><p id="cookie">…</p>
<script>
(async () => {{
  const got = await (await fetch("/api/greeting")).text();
  const posted = await (await fetch("/api/echo", {{method: "POST", headers: {{"Content-Type": "application/json"}},
                                                   body: JSON.stringify({{ask: "weather"}})}})).json();
  document.getElementById("got").textContent = got;
  document.getElementById("posted").textContent = posted.answer;
  document.getElementById("cookie").textContent = "cookie: " + document.cookie;
  await document.fonts.load('34px "Archived Face"');
  document.body.insertAdjacentHTML("beforeend", "<p id=done>in</p>");
}})();
</script></body></html>"""

FRAME = """<!DOCTYPE html><html><body style="margin:0;background:#859900;color:#fff;font:22px 'Liberation Sans'">
<div style="padding:12px">Framed over HTTPS</div></body></html>"""


@cache
def _picture(fmt: str) -> bytes:
    """Four coloured squares, as PNG or JPEG."""
    tiles = [pyvips.Image.black(80, 60).new_from_image(colour) for colour in
             ([220, 50, 47], [181, 137, 0], [108, 113, 196], [42, 161, 152])]
    image = pyvips.Image.arrayjoin(tiles, across=2).cast("uchar")
    return bytes(image.pngsave_buffer() if fmt == "png" else image.jpegsave_buffer(Q=90))


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def _answer(self, status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        extra = dict(headers or {})
        if content_type.startswith(("text/", "application/json")) and "gzip" in self.headers.get(
                "Accept-Encoding", ""):
            body = gzip.compress(body)
            extra["Content-Encoding"] = "gzip"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        path = urlsplit(self.path).path
        self.server.requests.append(("GET", self.path))
        if path == "/start":
            self._answer(302, "text/plain", b"", {"Location": "/page.html"})
        elif path == "/page.html":
            self._answer(200, "text/html; charset=utf-8", PAGE.format(frame=self.server.frame_url).encode(),
                         {"Set-Cookie": "visit=archived-evening; Path=/"})
        elif path == "/face.ttf":
            self._answer(200, "font/ttf", FONT.read_bytes())
        elif path in ("/picture.png", "/picture.jpg"):
            self._answer(200, f"image/{'png' if path.endswith('png') else 'jpeg'}", _picture(path[-3:]))
        elif path == "/frame.html":
            self._answer(200, "text/html; charset=utf-8", FRAME.encode())
        elif path == "/api/greeting":
            self._answer(200, "text/plain; charset=utf-8", GREETING.encode())
        else:
            self._answer(404, "text/plain", b"not here")

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.requests.append(("POST", self.path))
        if urlsplit(self.path).path == "/api/echo":
            asked = json.loads(body).get("ask", "")
            self._answer(200, "application/json", json.dumps({"answer": ANSWERS.get(asked, "?")}).encode())
        else:
            self._answer(404, "text/plain", b"not here")

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    requests: list[tuple[str, str]]
    frame_url: str


class Replayable:
    """The site on `host` (a name the service resolves to 127.0.0.1) over HTTP, and its HTTPS twin with `tls`."""

    def __init__(self, host: str, tls: ssl.SSLContext) -> None:
        self.host = host
        self._servers = [_Server(("127.0.0.1", 0), _Handler) for _ in range(2)]
        self._servers[1].socket = tls.wrap_socket(self._servers[1].socket, server_side=True)
        for server in self._servers:
            server.requests = []
            server.frame_url = f"https://{host}:{self._servers[1].server_address[1]}/frame.html"
        self._threads = [threading.Thread(target=server.serve_forever, daemon=True) for server in self._servers]

    @property
    def start_url(self) -> str:
        return f"http://{self.host}:{self._servers[0].server_address[1]}/start"

    @property
    def page_url(self) -> str:
        return f"http://{self.host}:{self._servers[0].server_address[1]}/page.html"

    @property
    def frame_url(self) -> str:
        return self._servers[0].frame_url

    @property
    def requests(self) -> list[tuple[str, str]]:
        return [request for server in self._servers for request in server.requests]

    def __enter__(self) -> Replayable:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def __exit__(self, *exc: object) -> None:
        self.stop()
