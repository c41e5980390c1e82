"""The egress proxy: every connection the browser makes goes through it (DESIGN §5).

Chromium is started with `--proxy-server` pointing here and `--proxy-bypass-list=<-loopback>` (without
it Chromium would connect to loopback directly). For each CONNECT tunnel (HTTPS, WebSockets) or
plain-HTTP request the proxy resolves the host itself, checks every answer against the policy, and
connects to the address it checked, so nothing can swap the address in between (DNS rebinding).
Plain-HTTP requests are forwarded one per connection (`Connection: close`), so a kept-alive proxy
connection can never carry a later request to another host past the check.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from render.errors import NameNotResolved
from render.network_policy import AddressNotAllowed, NetworkPolicy

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_SECONDS = 15
HEADER_LIMIT_BYTES = 64 * 1024
REFUSED_HEADER = "x-screenshot-egress"
_HOP_BY_HOP = {"proxy-connection", "proxy-authorization", "connection", "keep-alive"}


@dataclass(frozen=True)
class Upstream:
    """The proxy a job's traffic is chained to (`proxy` or `ip_country_code`), already resolved."""

    host: str
    address: str
    port: int
    authorization: str | None  # a Proxy-Authorization value

    @classmethod
    def parse(cls, url: str) -> tuple[str, int, str | None]:
        """(host, port, Proxy-Authorization) of `http://user:password@host:port/`."""
        parts = urlsplit(url)
        credentials = None
        if parts.username is not None:
            raw = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            credentials = "Basic " + base64.b64encode(raw.encode()).decode()
        return parts.hostname or "", parts.port or 80, credentials


@dataclass(frozen=True)
class Refusal:
    """A connection the policy stopped."""

    host: str
    reason: str
    kind: str = "policy"  # policy (refused by the network policy), unresolved or unreachable


def _origin(scheme: str, host: str, port: str) -> str:
    """`scheme://host[:port]` as browsers write origins (default ports left out, IPv6 in brackets)."""
    default = {"https": "443", "http": "80"}[scheme]
    name = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"{scheme}://{name.lower()}" + ("" if port == default else f":{port}")


class EgressProxy:
    """An HTTP proxy on loopback that enforces the network policy for one worker's browser."""

    def __init__(self, policy: NetworkPolicy) -> None:
        self.policy = policy
        self.refusals: list[Refusal] = []  # since the current job started (jobs run one at a time)
        self.upstream: Upstream | None = None  # the current job's upstream proxy
        self.origins: set[str] = set()  # origins the current job's browser connected to (to wipe afterwards)
        self._server: asyncio.Server | None = None
        # asyncio holds a connection's task only weakly: an idle one (a kept-alive tunnel waiting on both
        # sides) could be garbage-collected mid-await, its `finally` then failing with "coroutine ignored
        # GeneratorExit". Held here until they end.
        self._connections: set[asyncio.Task[None]] = set()

    def begin_job(self, upstream: Upstream | None) -> None:
        """A new job starts: its own refusals and upstream. Connections still open from the previous
        job (a slow DNS answer, say) report nothing into this one."""
        self.refusals = []  # a new list: open connections keep appending to the one they started with
        self.origins = set()
        self.upstream = upstream

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=HEADER_LIMIT_BYTES)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for connection in list(self._connections):
                connection.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)
        try:
            await self._handle(reader, writer, self.refusals, self.upstream, self.origins)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            pass
        except Exception:
            log.exception("egress proxy failure")
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, refusals: list[Refusal],
                      chain: Upstream | None, origins: set[str]) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, target, _version = request_line.split(" ", 2)
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            path = ""
        else:
            parts = urlsplit(target)
            if parts.scheme != "http" or not parts.hostname:
                await _answer(writer, 400, "only absolute http:// requests and CONNECT are proxied")
                return
            host, port = parts.hostname, str(parts.port or 80)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if method == "CONNECT":  # https, or a WebSocket (then the origin may be http's too)
            origins.update({_origin("https", host, port), *([_origin("http", host, port)] if port != "443" else [])})
        else:
            origins.add(_origin("http", host, port))
        try:
            address = await self.policy.checked_address(host)
        except AddressNotAllowed as refused:
            refusals.append(Refusal(host, str(refused)))
            log.info("egress refused: %s", refused)
            await _answer(writer, 403, str(refused), marker="refused")
            return
        except NameNotResolved as error:
            refusals.append(Refusal(host, error.message, kind="unresolved"))
            await _answer(writer, 502, error.message, marker="unresolved")
            return
        connect_to = (chain.address, chain.port) if chain else (str(address), int(port))
        try:
            upstream_reader, upstream_writer = await asyncio.wait_for(
                asyncio.open_connection(*connect_to), CONNECT_TIMEOUT_SECONDS)
        except (OSError, TimeoutError) as error:
            errno = getattr(error, "errno", None)
            reason = f"cannot connect to {host}:{port} ({os.strerror(errno) if errno else 'timed out'})"
            refusals.append(Refusal(host, reason, kind="unreachable"))
            await _answer(writer, 502, reason, marker="unreachable")
            return
        proxy_auth = [f"Proxy-Authorization: {chain.authorization}"] if chain and chain.authorization else []
        try:
            if method == "CONNECT":
                if chain is not None:
                    upstream_writer.write("\r\n".join([f"CONNECT {host}:{port} HTTP/1.1", f"Host: {host}:{port}",
                                                        *proxy_auth, "", ""]).encode("latin-1"))
                    answer = await asyncio.wait_for(upstream_reader.readuntil(b"\r\n\r\n"), CONNECT_TIMEOUT_SECONDS)
                    status_line = answer.split(b"\r\n", 1)[0].decode("latin-1")
                    if status_line.split(" ")[1:2] != ["200"]:
                        await _answer(writer, 502, f"the upstream proxy refused the tunnel: {status_line}",
                                      marker="unreachable")
                        return
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            else:
                kept = [line for line in header_lines if line and line.split(":", 1)[0].strip().lower()
                        not in _HOP_BY_HOP]
                # Through an upstream proxy the request keeps its absolute form.
                request_target = target if chain is not None else path
                upstream_writer.write(f"{method} {request_target} HTTP/1.1\r\n".encode("latin-1"))
                upstream_writer.write(("\r\n".join([*kept, *proxy_auth, "Connection: close"]) + "\r\n\r\n"
                                       ).encode("latin-1"))
            await _pipe_both(reader, writer, upstream_reader, upstream_writer)
        finally:
            upstream_writer.close()


async def _answer(writer: asyncio.StreamWriter, status: int, message: str, *, marker: str = "") -> None:
    """The egress's own answer; `marker` (refused, unresolved, unreachable) tells it from the target's."""
    body = message.encode()
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    extra = f"{REFUSED_HEADER}: {marker}\r\n" if marker else ""
    writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                 f"{extra}Connection: close\r\n\r\n".encode() + body)
    await writer.drain()


async def _copy(source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
    try:
        while chunk := await source.read(64 * 1024):
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
