"""Local servers that receive what the service sends out: webhook deliveries, vision requests, and UDP that
must never arrive.

A `Receiver` records every request and answers with its `answer` function, so a test can play a
receiver that is slow, failing or hanging, or a third-party API such as an OpenAI-compatible vision
provider (`vision_answer`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyvips


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes
    at: float = field(default_factory=time.time)

    def json(self) -> dict:  # type: ignore[type-arg]
        return json.loads(self.body)  # type: ignore[no-any-return]


Answer = Callable[[Received], tuple[int, dict[str, str], bytes]]


def ok(received: Received) -> tuple[int, dict[str, str], bytes]:
    return 200, {}, b""


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        received = Received(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                            self.rfile.read(length))
        receiver = self.server.receiver
        with receiver.lock:
            receiver.requests.append(received)
        status, headers, body = receiver.answer(received)
        try:
            self.send_response(status)
            for name, value in {"content-type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the sender gave up waiting (a hanging receiver under test)

    do_POST = do_GET = _handle  # noqa: N815 (http.server's naming)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: Receiver


class Receiver:
    """`with Receiver(answer) as r:` serves on a free port of `host` (loopback); `r.requests` lists what came."""

    def __init__(self, answer: Answer = ok, host: str = "127.0.0.1") -> None:
        self.answer = answer
        self.requests: list[Received] = []
        self.lock = threading.Lock()
        self.host = host
        self._server = _Server((host, 0), _Handler)
        self._server.receiver = self

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self._server.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base + path

    def to(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.path.split("?", 1)[0] == path]

    def wait_for(self, path: str, count: int = 1, timeout: float = 60) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.to(path)
            if len(got) >= count:
                return got
            time.sleep(0.05)
        raise TimeoutError(f"{count} request(s) to {path} did not arrive within {timeout} s "
                           f"(got {len(self.to(path))})")

    def __enter__(self) -> Receiver:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


# --- an OpenAI-compatible vision provider -------------------------------------------------------

VISION_KEYS = {
    "sk-test-good": 200, "sk-test-off-schema": 200, "sk-test-prose": 200, "sk-test-revoked": 401,
    "sk-test-limited": 429, "sk-test-broken": 500,
    "sk-test-bad-request": 400,
}


def vision_answer(received: Received) -> tuple[int, dict[str, str], bytes]:
    """Chat completions as OpenAI answers them. The key picks the outcome (VISION_KEYS); a good key gets
    a completion that describes the image it was sent (format, size, colour of the centre pixel), so
    tests can check that the final image went out."""
    key = received.headers.get("authorization", "").removeprefix("Bearer ")
    status = VISION_KEYS.get(key, 401)
    if status != 200:
        error = {"message": f"test provider says {status}", "type": "invalid_request_error", "code": status}
        return status, {}, json.dumps({"error": error}).encode()
    request = received.json()
    text, image = request["messages"][0]["content"]
    media_type, data = image["image_url"]["url"].removeprefix("data:").split(";base64,", 1)
    decoded = pyvips.Image.new_from_buffer(base64.b64decode(data), "")
    centre = [round(v) for v in decoded.getpoint(decoded.width // 2, decoded.height // 2)[:3]]
    completion = (f"Vu: {media_type} {decoded.width}×{decoded.height}, centre {centre}, "
                  f"prompt «{text['text']}», max_tokens {request.get('max_tokens')}, model {request['model']}")
    wanted = request.get("response_format")
    if wanted is not None:  # structured output, as OpenAI's json_schema response_format asks
        assert wanted["type"] == "json_schema" and wanted["json_schema"]["strict"] is True
        facts = {"media_type": media_type, "width": decoded.width, "height": decoded.height, "centre": centre,
                 "prompt": text["text"]}
        properties = wanted["json_schema"]["schema"].get("properties", {})
        answer: object = {name: facts[name] for name in properties if name in facts}
        if key == "sk-test-off-schema":  # a model that answers beside the schema
            answer = {**answer, "width": str(decoded.width)}
        completion = json.dumps(answer) if key != "sk-test-prose" else "Sure! The image is 200 px wide."
    body = {"id": "chatcmpl-test", "object": "chat.completion", "model": request["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": completion},
                         "finish_reason": "stop"}]}
    return 200, {}, json.dumps(body).encode()


class UdpCanary:
    """A UDP port on 127.0.0.1 that counts every datagram it receives."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.datagrams = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._count, daemon=True)
        self._thread.start()

    def _count(self) -> None:
        while not self._stop.is_set():
            try:
                self.sock.recv(65536)
                self.datagrams += 1
            except TimeoutError:
                continue

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@contextlib.contextmanager
def udp_canary() -> Iterator[UdpCanary]:
    canary = UdpCanary()
    try:
        yield canary
    finally:
        canary.close()


def webrtc_page(port: int) -> str:
    """Opens a peer connection with a STUN and a TURN server on `port` and a WebTransport session; shows
    the ICE candidates gathered in its title."""
    return f"""<!DOCTYPE html><html><body><script>
const pc = new RTCPeerConnection({{iceServers: [{{urls: 'stun:127.0.0.1:{port}'}},
  {{urls: 'turn:127.0.0.1:{port}?transport=udp', username: 'u', credential: 'p'}}]}});
pc.createDataChannel('leak');
document.title = 'candidates:';
pc.onicecandidate = e => {{ if (e.candidate) document.title += ' ' + e.candidate.type; }};
pc.createOffer().then(offer => pc.setLocalDescription(offer));
try {{ new WebTransport('https://127.0.0.1:{port}/'); }} catch (e) {{}}
</script></body></html>"""
