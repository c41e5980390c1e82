"""The egress proxy as a boundary (render/net/egress.py), driven by raw sockets the way a hostile or buggy
client would: keep-alive reuse, pipelining, tunnels kept across jobs, malformed and huge requests, slow
clients, and fuzzed input. No browser: the client is this test, the targets are loopback servers.

Three targets share one port: a.test (127.0.0.2) and b.test (127.0.0.3), which the policy allows, and
secret.test (127.0.0.1), which it refuses and which must never see a byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import h11
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from render.net import http1
from render.net.egress import EgressProxy
from render.net.policy import NetworkPolicy
from render.net.traffic import REFUSED_HEADER, Upstream

HOSTS = {"a.test": "127.0.0.2", "b.test": "127.0.0.3", "secret.test": "127.0.0.1"}


@dataclass
class Target:
    """A loopback HTTP server that logs every request it parses and answers by path."""

    host: str
    seen: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)  # (target, headers, body)
    raw: bytearray = field(default_factory=bytearray)  # every byte it received

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        http = h11.Connection(h11.SERVER)
        try:
            while True:
                request, body = await self._request(http, reader)
                if request is None:
                    return
                path = request.target.decode()
                self.seen.append((path, {k.decode(): v.decode() for k, v in request.headers.raw_items()}, body))
                if path.startswith("/early"):  # refuses the upload at once, then discards it as servers do
                    writer.write(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\n\r\ntoo big!")
                    await writer.drain()
                    writer.write_eof()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(2):
                            while await reader.read(65536):
                                pass
                    return
                if path.startswith("/close-delimited"):  # no length: the body ends when the connection does
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + self.host.encode() * 3)
                    await writer.drain()
                    return
                content = body if path.startswith("/echo") else self.host.encode()
                headers = [(b"content-type", b"text/plain")]
                if path.startswith("/chunked"):
                    headers.append((b"transfer-encoding", b"chunked"))
                else:
                    headers.append((b"content-length", str(len(content)).encode()))
                # Never `Connection: close`, and the connection stays open: a server hoping to be sent the
                # browser's next request, whatever its host.
                writer.write(http.send(h11.Response(status_code=200, headers=headers)))
                if request.method != b"HEAD":
                    writer.write(http.send(h11.Data(data=content)))
                writer.write(http.send(h11.EndOfMessage()))
                await writer.drain()
                if http.our_state is not h11.DONE or http.their_state is not h11.DONE:
                    await reader.read()  # asked to close, it keeps the connection open all the same
                    return
                http.start_next_cycle()
        except (ConnectionError, h11.ProtocolError):
            return
        finally:
            writer.close()

    async def _request(self, http: h11.Connection, reader: asyncio.StreamReader) -> tuple[Any, bytes]:
        request, body = None, b""
        while True:
            event = http.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                self.raw += data
                http.receive_data(data)
            elif isinstance(event, h11.Request):
                request = event
                if event.target.startswith(b"/early"):  # answered before the body arrives
                    return request, b""
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return request, body
            else:
                return None, b""


@dataclass
class Rig:
    proxy: EgressProxy
    targets: dict[str, Target]
    port: int
    failures: list[logging.LogRecord]  # errors the proxy logged
    clients: list[asyncio.StreamWriter] = field(default_factory=list)

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"

    async def connect(self, url: str | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host, port = (url or self.proxy.url).removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        self.clients.append(writer)
        return reader, writer

    def secret_untouched(self) -> None:
        assert self.targets["secret.test"].raw == b"", "the refused host received bytes"


class _Failures(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def _serve_on_one_port(targets: dict[str, Target]) -> tuple[list[asyncio.Server], int]:
    """The three targets on one port of their three addresses; a port free on the first address may be
    taken on another (other tests' servers run on 127.0.0.1), so a collision means another port."""
    for _ in range(50):
        servers = [await asyncio.start_server(targets["a.test"].serve, HOSTS["a.test"], 0)]
        port = servers[0].sockets[0].getsockname()[1]
        try:
            for name in ("b.test", "secret.test"):
                servers.append(await asyncio.start_server(targets[name].serve, HOSTS[name], port))
        except OSError:
            for server in servers:
                server.close()
            continue
        return servers, port
    raise RuntimeError("no port free on all three loopback addresses")


@asynccontextmanager
async def rig() -> AsyncIterator[Rig]:
    targets = {name: Target(name) for name in HOSTS}
    servers, port = await _serve_on_one_port(targets)
    policy = NetworkPolicy(False, {name: [ipaddress.ip_address(a)] for name, a in HOSTS.items()},
                           [ipaddress.ip_network("127.0.0.2/32"), ipaddress.ip_network("127.0.0.3/32")], set())
    proxy = EgressProxy(policy)
    failures = _Failures()
    logging.getLogger("render.net").addHandler(failures)  # the proxy and its HTTP/1 side
    running = Rig(proxy, targets, port, failures.records)
    try:  # whatever fails, nothing is left open: a socket left to the garbage collector fails a later test
        await proxy.start()
        proxy.begin_job(None)
        yield running
    finally:
        logging.getLogger("render.net").removeHandler(failures)
        for client in running.clients:
            client.close()
            with contextlib.suppress(ConnectionError):
                await client.wait_closed()
        await proxy.close()
        for server in servers:
            server.close()


def run(test: Callable[[Rig], Awaitable[None]]) -> None:
    async def main() -> None:
        async with rig() as running:
            await asyncio.wait_for(test(running), 30)
    asyncio.run(main())


def get(url: str, *extra: str, method: str = "GET") -> bytes:
    host = re.match(r"http://([^/]+)", url).group(1)  # type: ignore[union-attr]
    return "\r\n".join([f"{method} {url} HTTP/1.1", f"Host: {host}", *extra, "", ""]).encode()


async def read_response(reader: asyncio.StreamReader, *, to_head: bool = False) -> tuple[int, dict[str, str], bytes]:
    """One response as the proxy frames it (Content-Length or chunked; none to a HEAD); (0, {}, b"") at EOF."""
    head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
    if not head:
        return 0, {}, b""
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    if to_head:
        return status, headers, b""
    if "content-length" in headers:
        return status, headers, await reader.readexactly(int(headers["content-length"]))
    body = b""
    if headers.get("transfer-encoding") == "chunked":
        while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
            body += await reader.readexactly(size)
            await reader.readexactly(2)
        await reader.readuntil(b"\r\n")
    return status, headers, body


async def closed(reader: asyncio.StreamReader) -> bool:
    """Whether the proxy closed the connection (EOF or reset within a second)."""
    try:
        return await asyncio.wait_for(reader.read(1), 1) == b""
    except ConnectionError:
        return True


def test_a_kept_alive_connection_sends_each_request_to_its_own_host() -> None:
    async def test(rig: Rig) -> None:
        reader, writer = await rig.connect()
        # a.test answers without closing, hoping to be sent whatever comes next on this connection.
        for host in ("a.test", "b.test", "a.test", "secret.test"):
            writer.write(get(rig.url(host, "/keep")))
            status, headers, body = await read_response(reader)
            if host == "secret.test":
                assert status == 403 and headers[REFUSED_HEADER] == "refused"
            else:
                assert (status, body) == (200, host.encode())
        assert [path for path, _, _ in rig.targets["a.test"].seen] == ["/keep", "/keep"]
        assert [path for path, _, _ in rig.targets["b.test"].seen] == ["/keep"]
        rig.secret_untouched()
        assert rig.proxy.traffic().origins == {rig.url("a.test").rstrip("/"), rig.url("b.test").rstrip("/"),
                                     rig.url("secret.test").rstrip("/")}
        assert [refusal.host for refusal in rig.proxy.traffic().refusals] == ["secret.test"]
    run(test)


def test_pipelined_requests_are_answered_in_order_each_checked() -> None:
    async def test(rig: Rig) -> None:
        reader, writer = await rig.connect()
        writer.write(get(rig.url("a.test", "/one")) + get(rig.url("b.test", "/chunked"))
                     + get(rig.url("a.test", "/three")))
        answers = [await read_response(reader) for _ in range(3)]
        assert [(status, body) for status, _, body in answers] == [(200, b"a.test"), (200, b"b.test"),
                                                                   (200, b"a.test")]
        assert answers[1][1]["transfer-encoding"] == "chunked"
        # A refused request in the pipeline ends the connection; nothing after it is forwarded anywhere.
        reader, writer = await rig.connect()
        writer.write(get(rig.url("secret.test", "/x")) + get(rig.url("a.test", "/after-refusal")))
        status, _, _ = await read_response(reader)
        assert status == 403 and await closed(reader)
        assert "/after-refusal" not in [path for path, _, _ in rig.targets["a.test"].seen]
        rig.secret_untouched()
    run(test)


def test_bodies_and_framing_cross_intact() -> None:
    async def test(rig: Rig) -> None:
        reader, writer = await rig.connect()
        payload = bytes(range(256)) * 300
        writer.write(get(rig.url("a.test", "/echo"), f"Content-Length: {len(payload)}", method="POST") + payload)
        assert (await read_response(reader))[2] == payload
        chunked = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        writer.write(get(rig.url("b.test", "/echo"), "Transfer-Encoding: chunked", method="PUT") + chunked)
        assert (await read_response(reader))[2] == b"hello world"
        writer.write(get(rig.url("a.test", "/head"), method="HEAD"))
        status, headers, body = await read_response(reader, to_head=True)
        assert (status, headers["content-length"], body) == (200, "6", b"")
        # A body that ends when the target closes reaches the client whole, framed for a kept-alive client.
        writer.write(get(rig.url("b.test", "/close-delimited")))
        assert (await read_response(reader))[2] == b"b.test" * 3
        writer.write(get(rig.url("a.test", "/still-alive")))
        assert (await read_response(reader))[2] == b"a.test"
        # A target that refuses an upload before reading it: its answer still reaches the client.
        big = b"x" * (8 * 1024 * 1024)
        writer.write(get(rig.url("b.test", "/early"), f"Content-Length: {len(big)}", method="POST") + big)
        assert (await read_response(reader))[:3:2] == (413, b"too big!")
        reader, writer = await rig.connect()
        # Hop-by-hop headers stay on their hop; the target is asked to close its own connection.
        writer.write(get(rig.url("a.test", "/hop"), "Proxy-Authorization: Basic c2VjcmV0", "Keep-Alive: 5",
                         "X-End-To-End: yes"))
        await read_response(reader)
        _, seen, _ = rig.targets["a.test"].seen[-1]
        assert seen["X-End-To-End"] == "yes" and seen["connection"] == "close"
        assert "Proxy-Authorization" not in seen and "Keep-Alive" not in seen
    run(test)


def test_a_tunnel_of_one_job_is_closed_when_the_next_job_starts() -> None:
    async def test(rig: Rig) -> None:
        reader, writer = await rig.connect()
        writer.write(f"CONNECT a.test:{rig.port} HTTP/1.1\r\nHost: a.test:{rig.port}\r\n\r\n".encode())
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        writer.write(b"GET /in-tunnel HTTP/1.1\r\nHost: a.test\r\n\r\n")  # through the tunnel, as TLS would be
        assert (await read_response(reader))[2] == b"a.test"
        first_job = rig.proxy.traffic().origins
        assert f"https://a.test:{rig.port}" in first_job
        rig.proxy.begin_job(Upstream("proxy.test", "127.0.0.1", 9, None))  # the next job, another upstream
        assert await closed(reader), "a tunnel outlived its job"
        assert rig.proxy.traffic().origins == set() and rig.proxy.traffic().refusals == []
        # A new connection belongs to the new job: its origin and its upstream (here: unreachable).
        reader, writer = await rig.connect()
        writer.write(f"CONNECT b.test:{rig.port} HTTP/1.1\r\nHost: b.test\r\n\r\n".encode())
        status, _, _ = await read_response(reader)
        assert status == 502 and f"https://b.test:{rig.port}" in rig.proxy.traffic().origins
        assert f"https://b.test:{rig.port}" not in first_job
        assert [path for path, _, _ in rig.targets["b.test"].seen] == []
    run(test)


def test_kept_alive_plain_connections_are_closed_at_the_next_job_too() -> None:
    async def test(rig: Rig) -> None:
        reader, writer = await rig.connect()
        writer.write(get(rig.url("a.test", "/first-job")))
        await read_response(reader)
        rig.proxy.begin_job(None)
        assert await closed(reader)
    run(test)


def test_contexts_jobs_run_at_once_each_on_its_own_listener_with_its_own_traffic() -> None:
    async def test(rig: Rig) -> None:
        first, second = await rig.proxy.open_listener(), await rig.proxy.open_listener()
        rig.proxy.begin_job(None, first)
        rig.proxy.begin_job(Upstream("proxy.test", "127.0.0.1", 9, None), second)  # at once, another upstream
        reader, writer = await rig.connect(first.url)
        writer.write(get(rig.url("a.test", "/first-context")))
        assert (await read_response(reader))[2] == b"a.test"
        other_reader, other_writer = await rig.connect(second.url)
        other_writer.write(get(rig.url("b.test", "/second-context")))
        assert (await read_response(other_reader))[0] == 502  # its own upstream (here: unreachable)
        assert rig.proxy.traffic(first).origins == {rig.url("a.test").rstrip("/")}
        assert rig.proxy.traffic(second).origins == {rig.url("b.test").rstrip("/")}
        assert rig.proxy.traffic().origins == set()  # the worker's own: neither job's
        rig.proxy.end_job(first)
        assert await closed(reader)
        reader, writer = await rig.connect(first.url)  # what the first context's page sends again
        writer.write(get(rig.url("a.test", "/sent-again")))
        assert await closed(reader) and rig.proxy.refused_elsewhere == 1
        assert [path for path, _, _ in rig.targets["a.test"].seen] == ["/first-context"]
        assert rig.proxy.traffic(second).origins == {rig.url("b.test").rstrip("/")}  # nothing of it is the second's
        rig.proxy.begin_job(None, second)  # the second context's next job: its connections of the last are closed
        assert await closed(other_reader)
        for url in (second.url, rig.proxy.url):  # the job's context, and the worker's own connections
            reader, writer = await rig.connect(url)
            writer.write(get(rig.url("b.test", "/second-job")))
            assert (await read_response(reader))[2] == b"b.test"
        await first.close()
        with pytest.raises(ConnectionError):
            await rig.connect(first.url)
    run(test)


def test_a_context_s_listener_serves_no_more_once_its_job_is_over() -> None:
    async def test(rig: Rig) -> None:
        context = await rig.proxy.open_listener()
        rig.proxy.begin_job(None, context)
        page_reader, page_writer = await rig.connect(context.url)
        page_writer.write(get(rig.url("a.test", "/during-the-job")))
        assert (await read_response(page_reader))[2] == b"a.test"
        upload_reader, upload_writer = await rig.connect()  # the worker's own, through the browser-wide listener
        rig.proxy.end_job(context)
        assert await closed(page_reader)  # the page's kept-alive connection
        reader, writer = await rig.connect(context.url)  # a beacon the page sends as it is wiped
        writer.write(get(rig.url("a.test", "/after-the-job")))
        assert await closed(reader) and rig.proxy.refused_elsewhere == 1
        upload_writer.write(get(rig.url("b.test", "/upload")))  # the worker's own connection goes on
        assert (await read_response(upload_reader))[2] == b"b.test"
        rig.proxy.begin_job(None, context)  # the context's next job
        reader, writer = await rig.connect(context.url)
        writer.write(get(rig.url("a.test", "/next-job")))
        assert (await read_response(reader))[2] == b"a.test"
        assert [path for path, _, _ in rig.targets["a.test"].seen] == ["/during-the-job", "/next-job"]
    run(test)


@pytest.mark.parametrize(("raw", "status"), [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", 400),  # origin-form: only absolute requests are proxied
    (b"GET ftp://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400),
    (b"GET http://a.test:99999/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400),
    (b"CONNECT a.test HTTP/1.1\r\nHost: a.test\r\n\r\n", 400),
    (b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n", 400),
    (b"GET http://a.test/ HTTP/1.1\r\nBad Header\r\n\r\n", 400),
    (b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX-Big: " + b"x" * (100 * 1024) + b"\r\n\r\n", 431),
    (b"POST http://a.test/echo HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
], ids=["garbage", "origin-form", "ftp", "bad-port", "connect-no-port", "upgrade", "bad-header", "huge-header",
        "two-lengths"])
def test_malformed_requests_are_refused_and_reach_nobody(raw: bytes, status: int) -> None:
    async def test(rig: Rig) -> None:
        reader, writer = await rig.connect()
        writer.write(raw.replace(b"a.test/", f"a.test:{rig.port}/".encode()))
        answered, _, _ = await read_response(reader)
        assert answered == status
        assert await closed(reader)
        assert all(target.seen == [] for target in rig.targets.values())
    run(test)


def test_a_slow_client_is_dropped_and_an_idle_one_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http1, "HEAD_TIMEOUT_SECONDS", 0.5)
    monkeypatch.setattr(http1, "IDLE_TIMEOUT_SECONDS", 0.5)

    async def test(rig: Rig) -> None:
        reader, writer = await rig.connect()
        writer.write(b"GET http://a.test")  # and never the rest
        status, _, _ = await read_response(reader)
        assert status == 408 and await closed(reader)
        reader, _ = await rig.connect()
        await asyncio.sleep(0.8)
        assert await closed(reader)
        assert rig.targets["a.test"].seen == []
    run(test)


REQUEST_PARTS = st.lists(st.one_of(
    st.sampled_from([b"GET ", b"POST ", b"CONNECT ", b"http://a.test:PORT/", b"http://secret.test:PORT/",
                     b"secret.test:PORT", b"a.test:PORT", b" HTTP/1.1\r\n", b"Host: a.test\r\n",
                     b"Content-Length: 5\r\n", b"Transfer-Encoding: chunked\r\n", b"\r\n", b"0\r\n\r\n",
                     b"\n", b":", b"\x00", b"\xff"]),
    st.binary(max_size=40)), max_size=25)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=REQUEST_PARTS)
def test_fuzzed_input_never_reaches_the_refused_host_nor_breaks_the_proxy(parts: list[bytes]) -> None:
    async def test(rig: Rig) -> None:
        reader, writer = await rig.connect()
        writer.write(b"".join(parts).replace(b"PORT", str(rig.port).encode()))
        writer.write_eof()
        with contextlib.suppress(ConnectionError):
            await asyncio.wait_for(reader.read(), 5)  # the proxy answers and closes, whatever it was sent
        rig.secret_untouched()
        assert rig.failures == [], "the proxy failed on its input"

        # And it still serves the next client.
        reader, writer = await rig.connect()
        writer.write(get(rig.url("a.test", "/after-fuzz")))
        assert (await read_response(reader))[2] == b"a.test"
    run(test)

