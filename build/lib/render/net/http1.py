"""The egress proxy's HTTP/1.1 side: one browser connection served request by request (h11 both ways), each
CONNECT tunnel and plain request checked against the policy before a connection of its own is opened to
the very address that was checked (render.net.egress says why)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import Any
from urllib.parse import urlsplit

import h11

from render.contract.errors import NameNotResolved
from render.net.policy import AddressNotAllowed, NetworkPolicy
from render.net.traffic import REFUSED_HEADER, JobTraffic, Refusal, origin_of

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_SECONDS = 15
HEADER_LIMIT_BYTES = 64 * 1024  # a request's head (Chromium's own requests stay far below)
RESPONSE_HEADER_LIMIT_BYTES = 256 * 1024  # a response's head: Chromium's own limit
HEAD_TIMEOUT_SECONDS = 15  # from a request's first byte to its last header: slow clients are dropped
IDLE_TIMEOUT_SECONDS = 60  # a kept-alive client connection with no request
READ_SIZE = 64 * 1024
LINGER_SECONDS = 2  # how long an answered client may go on sending the body nobody will read
# Headers for this hop only, never forwarded (RFC 9110 §7.6.1), and Expect (the body is sent at once).
_HOP_BY_HOP = {b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive", b"te", b"trailer",
               b"upgrade", b"expect", b"proxy-authenticate"}



class ProtocolViolation(Exception):
    """A peer broke HTTP/1.1 or a limit; the connection is answered (if it can be) and closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ClientConnection:
    """One connection from the browser: CONNECT tunnels and plain-HTTP requests, each one checked."""

    def __init__(self, policy: NetworkPolicy, job: JobTraffic, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.policy = policy
        self.job = job
        self.reader = reader
        self.writer = writer
        self.http = h11.Connection(h11.SERVER, max_incomplete_event_size=HEADER_LIMIT_BYTES)

    async def serve(self) -> None:
        """Requests one after another (pipelined ones wait their turn) until either side is done."""
        while True:
            try:
                request = await self._next_request()
            except ProtocolViolation as violation:
                await self._answer(violation.status, str(violation))
                return
            if request is None:
                return
            if request.method == b"CONNECT":
                await self._tunnel(request)
                return
            try:
                if not await self._forward(request):
                    return
            except ProtocolViolation as violation:
                await self._answer(violation.status, str(violation))
                return
            if self.http.their_state is not h11.DONE:  # answered before its whole request arrived
                await self._linger()
                return
            if self.http.our_state is not h11.DONE:
                return
            self.http.start_next_cycle()

    async def _linger(self) -> None:
        """Half-close, and discard what the client still sends for a while: closing with unread bytes would
        reset the connection, and the client might lose the answer before reading it."""
        with contextlib.suppress(Exception):
            await self.writer.drain()
            self.writer.write_eof()
            async with asyncio.timeout(LINGER_SECONDS):
                while await self.reader.read(READ_SIZE):
                    pass

    async def _next_request(self) -> h11.Request | None:
        """The next request's head, or None when the client closed; a slow or broken one is a violation."""
        deadline: float | None = None  # set by the request's first byte
        while True:
            try:
                event = self.http.next_event()
            except h11.RemoteProtocolError as error:
                raise ProtocolViolation(error.error_status_hint, f"malformed request: {error}") from None
            if isinstance(event, h11.Request):
                # h11 bounds only a head that is still arriving; one that came whole is bounded here.
                size = len(event.target) + sum(len(name) + len(value) + 4 for name, value in event.headers)
                if size > HEADER_LIMIT_BYTES:
                    raise ProtocolViolation(431, f"the request head is over {HEADER_LIMIT_BYTES} bytes")
                return event
            if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None
            if event is not h11.NEED_DATA:
                raise ProtocolViolation(400, "expected a request")
            wait = IDLE_TIMEOUT_SECONDS if deadline is None else deadline - time.monotonic()
            try:
                data = await asyncio.wait_for(self.reader.read(READ_SIZE), max(0.0, wait))
            except TimeoutError:
                if deadline is None:
                    return None  # idle: closed quietly, the browser opens another when it needs one
                raise ProtocolViolation(408, f"the request head took over {HEAD_TIMEOUT_SECONDS} s") from None
            if deadline is None and data:
                deadline = time.monotonic() + HEAD_TIMEOUT_SECONDS
            self.http.receive_data(data)

    async def _checked_address(self, host: str) -> str | None:
        """The address the policy allows for `host`, or None once the refusal is answered and recorded."""
        try:
            return str(await self.policy.checked_address(host))
        except AddressNotAllowed as refused:
            self.job.refusals.append(Refusal(host, str(refused)))
            log.info("egress refused: %s", refused)
            await self._answer(403, str(refused), marker="refused")
        except NameNotResolved as error:
            self.job.refusals.append(Refusal(host, error.message, kind="unresolved"))
            await self._answer(502, error.message, marker="unresolved")
        return None

    async def _open(self, host: str, port: str,
                    address: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A connection to the checked address (or the job's upstream proxy), or None once answered."""
        chain = self.job.upstream_for(host)
        connect_to = (chain.address, chain.port) if chain else (address, int(port))
        try:
            return await asyncio.wait_for(asyncio.open_connection(*connect_to), CONNECT_TIMEOUT_SECONDS)
        except (OSError, TimeoutError) as error:
            errno = getattr(error, "errno", None)
            reason = f"cannot connect to {host}:{port} ({os.strerror(errno) if errno else 'timed out'})"
            self.job.refusals.append(Refusal(host, reason, kind="unreachable"))
            await self._answer(502, reason, marker="unreachable")
            return None

    async def _tunnel(self, request: h11.Request) -> None:
        """CONNECT host:port (https, or a WebSocket): checked, recorded, then bytes both ways."""
        host, _, port = request.target.decode("latin-1").rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit():
            await self._answer(400, "CONNECT needs host:port")
            return
        self.job.origins.add(origin_of("https", host, port))
        if port != "443":  # a WebSocket's page may be plain http
            self.job.origins.add(origin_of("http", host, port))
        address = await self._checked_address(host)
        if address is None:
            return
        opened = await self._open(host, port, address)
        if opened is None:
            return
        upstream_reader, upstream_writer = opened
        try:
            chain = self.job.upstream_for(host)
            if chain is not None:
                proxy_auth = [f"Proxy-Authorization: {chain.authorization}"] if chain.authorization else []
                upstream_writer.write("\r\n".join([f"CONNECT {host}:{port} HTTP/1.1", f"Host: {host}:{port}",
                                                    *proxy_auth, "", ""]).encode("latin-1"))
                answer = await asyncio.wait_for(upstream_reader.readuntil(b"\r\n\r\n"), CONNECT_TIMEOUT_SECONDS)
                status_line = answer.split(b"\r\n", 1)[0].decode("latin-1")
                if status_line.split(" ")[1:2] != ["200"]:
                    await self._answer(502, f"the upstream proxy refused the tunnel: {status_line}",
                                       marker="unreachable")
                    return
            established = h11.Response(status_code=200, headers=[], reason=b"Connection Established")
            self.writer.write(self.http.send(established))
            # Bytes the client sent after its CONNECT head already belong to the tunnel.
            early, _closed = self.http.trailing_data
            if early:
                upstream_writer.write(early)
            await _pipe_both(self.reader, self.writer, upstream_reader, upstream_writer)
        finally:
            upstream_writer.close()

    async def _forward(self, request: h11.Request) -> bool:
        """One plain-HTTP request to its own host on a connection of its own; True when the client
        connection may carry another request."""
        target = request.target.decode("latin-1")
        parts = urlsplit(target)
        try:
            port = str(parts.port or 80)
        except ValueError:
            port = ""
        if parts.scheme != "http" or not parts.hostname or not port:
            await self._answer(400, "only absolute http:// requests and CONNECT are proxied")
            return False
        if any(name == b"upgrade" for name, _ in request.headers):
            await self._answer(400, "protocol upgrades go through CONNECT")
            return False
        host = parts.hostname
        self.job.origins.add(origin_of("http", host, port))
        address = await self._checked_address(host)
        if address is None:
            return False
        opened = await self._open(host, port, address)
        if opened is None:
            return False
        upstream_reader, upstream_writer = opened
        try:
            return await _Exchange(self, request, upstream_reader, upstream_writer).run()
        finally:
            upstream_writer.close()

    async def _answer(self, status: int, message: str, *, marker: str = "") -> None:
        """The egress's own answer, closing the connection; `marker` (refused, unresolved, unreachable)
        tells it from the target's."""
        if self.http.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return  # a response is under way: the connection is simply closed
        body = message.encode()
        headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode()),
                   (b"connection", b"close"), *([(REFUSED_HEADER.encode(), marker.encode())] if marker else [])]
        try:
            self.writer.write(self.http.send(h11.Response(status_code=status, headers=headers)))
            self.writer.write(self.http.send(h11.Data(data=body)) + self.http.send(h11.EndOfMessage()))
        except h11.LocalProtocolError:  # e.g. a HEAD request: no body may follow
            pass
        with contextlib.suppress(ConnectionError):
            await self.writer.drain()


class _Exchange:
    """One request forwarded and its response relayed, both parsed, so each ends where HTTP says."""

    def __init__(self, client: ClientConnection, request: h11.Request, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.client = client
        self.request = request
        self.reader = reader
        self.writer = writer
        self.http = h11.Connection(h11.CLIENT, max_incomplete_event_size=RESPONSE_HEADER_LIMIT_BYTES)

    async def run(self) -> bool:
        parts = urlsplit(self.request.target.decode("latin-1"))
        chain = self.client.job.upstream_for(parts.hostname or "")
        # Through an upstream proxy the request keeps its absolute form.
        target = self.request.target if chain is not None else ((parts.path or "/") + (
            f"?{parts.query}" if parts.query else "")).encode("latin-1")
        headers = _forwarded(self.request.headers)
        if chain is not None and chain.authorization:
            headers.append((b"proxy-authorization", chain.authorization.encode("latin-1")))
        headers.append((b"connection", b"close"))
        self.writer.write(self.http.send(h11.Request(method=self.request.method, target=target, headers=headers)))
        try:
            await self._send_body()
        except ConnectionError:
            # The target answered before taking the whole body (an early 413 or 501) and closed: its answer
            # still goes to the client, whose connection then closes (the rest of its body is unread).
            pass
        return await self._relay_response()

    async def _send_body(self) -> None:
        """The request's body, as the client sends it, until its end."""
        client = self.client
        while True:
            try:
                event = await _next_event(client.http, client.reader, IDLE_TIMEOUT_SECONDS)
            except h11.RemoteProtocolError as error:
                raise ProtocolViolation(400, f"malformed request body: {error}") from None
            if isinstance(event, h11.Data):
                self.writer.write(self.http.send(event))
                await self.writer.drain()
            elif isinstance(event, h11.EndOfMessage):
                self.writer.write(self.http.send(h11.EndOfMessage()))
                await self.writer.drain()
                return
            else:  # the client closed mid-body
                raise ConnectionError("the client closed during its request body")

    async def _relay_response(self) -> bool:
        """The target's response, event by event, framed anew for the client; False when the client
        connection must close (the response could not be completed)."""
        client = self.client
        while True:
            try:
                # No time limit: a slow target is the page's to wait for, within the job's own timeout (the
                # next job closes whatever is left).
                event = await _next_event(self.http, self.reader, None)
            except h11.RemoteProtocolError:
                await client._answer(502, "the target's response is not valid HTTP", marker="unreachable")
                return False
            if isinstance(event, h11.InformationalResponse | h11.Response):
                kind = type(event)
                client.writer.write(client.http.send(kind(status_code=event.status_code,
                                                          headers=_forwarded(event.headers), reason=event.reason)))
            elif isinstance(event, h11.Data):
                client.writer.write(client.http.send(event))
                await client.writer.drain()
            elif isinstance(event, h11.EndOfMessage):
                client.writer.write(client.http.send(h11.EndOfMessage()))
                await client.writer.drain()
                return True
            else:  # closed before its end
                return False


async def _next_event(http: h11.Connection, reader: asyncio.StreamReader, timeout: float | None) -> Any:
    """The next h11 event of a message under way, reading as much as it needs (each read within `timeout`)."""
    while (event := http.next_event()) is h11.NEED_DATA:
        http.receive_data(await asyncio.wait_for(reader.read(READ_SIZE), timeout))
    return event


def _forwarded(headers: Any) -> list[tuple[bytes, bytes]]:
    """A message's end-to-end headers as they were written; with Transfer-Encoding, Content-Length goes (h11
    frames the body anew either way)."""
    names = {name for name, _ in headers}
    dropped = _HOP_BY_HOP | ({b"content-length"} if b"transfer-encoding" in names else set())
    return [(raw, value) for raw, value in headers.raw_items() if raw.lower() not in dropped]


async def _copy(source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
    try:
        while chunk := await source.read(READ_SIZE):
            target.write(chunk)
            await target.drain()
    finally:
        with contextlib.suppress(Exception):
            target.write_eof()


async def _pipe_both(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter,
                     upstream_reader: asyncio.StreamReader, upstream_writer: asyncio.StreamWriter) -> None:
    """Copy bytes both ways until the server side is done."""
    to_upstream = asyncio.ensure_future(_copy(client_reader, upstream_writer))
    try:
        await _copy(upstream_reader, client_writer)
    finally:
        to_upstream.cancel()
        await asyncio.gather(to_upstream, return_exceptions=True)
