"""Pages for the tests of a kept page's reuse between jobs (tests/integration/test_context_reuse.py): what a page
leaves in its browser context, and what it sees of the settings a capture can change. Under `/state/`."""

from __future__ import annotations

import time
from typing import Any


def _html(body: str) -> tuple[int, str, bytes]:
    return 200, "text/html; charset=utf-8", body.encode()


# State a page leaves in its browser context, for the tests of context reuse: the writer stores a cookie,
# localStorage, IndexedDB and Cache API entries and loads a script the HTTP cache keeps for an hour; the
# reader shows what it finds in <pre id="state"> and adds #done when it has looked.
STATE_WRITER = """<html><body><script src="/state/cached.js"></script><script>
document.cookie = "leak=1; max-age=3600; path=/";
localStorage.setItem("leak", "1");
sessionStorage.setItem("leak", "1");
window.name = "leak";
history.pushState({}, "", "#pushed");
const open = indexedDB.open("leakdb", 1);
open.onupgradeneeded = () => open.result.createObjectStore("s");
open.onsuccess = async () => {
  const tx = open.result.transaction("s", "readwrite");
  tx.objectStore("s").put("1", "k");
  await new Promise(done => tx.oncomplete = done);
  await (await caches.open("leak")).put("/state/entry", new Response("1"));
  document.body.insertAdjacentHTML("beforeend", "<p id=done>written</p>");
};
</script></body></html>"""
# The same state, written again as the page is left (pagehide, visibilitychange, unload, beforeunload) and by a timer
# that runs until the document is gone: the wipe after the job must come after all of it.
STATE_LEAVER = """<html><body><script>
function leave() {
  document.cookie = "leak=1; max-age=3600; path=/";
  localStorage.setItem("leak", "1");
  sessionStorage.setItem("leak", "1");
  window.name = "leak";
}
for (const event of ["pagehide", "visibilitychange", "unload", "beforeunload"]) addEventListener(event, leave);
setInterval(leave, 0);
document.body.insertAdjacentHTML("beforeend", "<p id=done>leaving</p>");
</script></body></html>"""
# A page that, as it is left, asks for a cookie that comes 400 ms later (an analytics beacon), and one that reads its
# cookies 1.5 s after it loads.
STATE_BEACON = """<html><body><script>
addEventListener("pagehide", () => fetch("/state/late-cookie?ms=400", {keepalive: true}));
document.body.insertAdjacentHTML("beforeend", "<p id=done>loaded</p>");
</script></body></html>"""
# A page that asks for something every 20 ms for as long as it lives, and once more as it is left: the web archive of
# the organisation's next job on the kept page must hold none of it.
STATE_CHATTY = """<html><body><script>
let n = 0;
setInterval(() => fetch("/echo?from=chatty&n=" + n++).catch(() => {}), 20);
addEventListener("pagehide", () => fetch("/state/late-cookie?ms=400&from=chatty", {keepalive: true}));
setTimeout(() => document.body.insertAdjacentHTML("beforeend", "<p id=done>chatting</p>"), 200);
</script></body></html>"""
STATE_LATE_READER = """<html><body><pre id="state"></pre><script>
setTimeout(() => {
  document.getElementById("state").textContent = JSON.stringify({cookie: document.cookie});
  document.body.insertAdjacentHTML("beforeend", "<p id=done>read</p>");
}, 1500);
</script></body></html>"""
STATE_READER = """<html><body><pre id="state"></pre><script src="/state/cached.js"></script><script>
(async () => {
  const found = {cookie: document.cookie, local: localStorage.getItem("leak"), caches: await caches.keys(),
                 session: sessionStorage.getItem("leak"), name: window.name, history: history.length};
  found.indexeddb = (await indexedDB.databases()).map(db => db.name);
  document.getElementById("state").textContent = JSON.stringify(found);
  document.body.insertAdjacentHTML("beforeend", "<p id=done>read</p>");
})();
</script></body></html>"""

# What a page sees of the settings a capture can change (for reuse of a page between jobs).
SETTINGS_PROBE = """<!DOCTYPE html><html><body><pre id="settings"></pre><script>
(async () => {
  document.getElementById("settings").textContent = JSON.stringify({
    width: innerWidth, height: innerHeight, dpr: devicePixelRatio, touch: navigator.maxTouchPoints,
    ua: navigator.userAgent, zone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    dark: matchMedia("(prefers-color-scheme: dark)").matches, print: matchMedia("print").matches,
    reducedMotion: matchMedia("(prefers-reduced-motion: reduce)").matches,
    geolocation: (await navigator.permissions.query({name: "geolocation"})).state});
  document.body.insertAdjacentHTML("beforeend", "<p id=done>read</p>");
})();
</script></body></html>"""


def _late_cookie(query: dict[str, list[str]]) -> tuple[int, str, bytes, dict[str, str]]:
    time.sleep(int(query.get("ms", ["1000"])[0]) / 1000)
    return 200, "text/plain", b"", {"Set-Cookie": "late=1; max-age=3600; path=/"}


# A page whose workers (a shared one and a dedicated one) keep opening IndexedDB databases every 5 ms, for as long as
# they live; after 500 ms it says whose databases it finds (#done: "dedicated,shared").
STATE_WORKERS = """<html><body><script>
new SharedWorker("/state/opener.js?kind=shared");
new Worker("/state/opener.js?kind=dedicated");
setTimeout(async () => {
  const kinds = new Set((await indexedDB.databases()).map(db => db.name.split("-")[1]));
  document.body.insertAdjacentHTML("beforeend", `<p id=done>${[...kinds].sort().join(",")}</p>`);
}, 500);
</script></body></html>"""
OPENER = b"""const kind = new URL(location.href).searchParams.get("kind");
let n = 0;
setInterval(() => indexedDB.open(`leak-${kind}-${n++}`), 5);"""


def routes() -> dict[str, Any]:
    return {
        "/state/workers.html": lambda q: _html(STATE_WORKERS),
        # Another page framed (`src`): of another site, it is an out-of-process frame of its own.
        "/state/framed.html": lambda q: _html(f'<iframe src="{q["src"][0]}" width="600" height="200"></iframe>'),
        "/state/opener.js": lambda q: (200, "text/javascript", OPENER),
        "/state/settings.html": lambda q: _html(SETTINGS_PROBE),
        "/state/writer.html": lambda q: _html(STATE_WRITER),
        "/state/leaver.html": lambda q: _html(STATE_LEAVER),
        "/state/beacon.html": lambda q: _html(STATE_BEACON),
        "/state/chatty.html": lambda q: _html(STATE_CHATTY),
        "/state/late-reader.html": lambda q: _html(STATE_LATE_READER),
        "/state/late-cookie": _late_cookie,
        "/state/reader.html": lambda q: _html(STATE_READER),
        "/state/cached.js": lambda q: (200, "text/javascript", b"window.cached = true;",
                                       {"Cache-Control": "public, max-age=3600"}),
    }
