"""The egress proxy: every connection the browser makes goes through it (docs/security.md).

Chromium is started with `--proxy-server` pointing here and `--proxy-bypass-list=<-loopback>` (without
it Chromium would connect to loopback directly). For each CONNECT tunnel (HTTPS, WebSockets) and each
plain-HTTP request the proxy resolves the host itself, checks every answer against the policy, and
connects to the address it checked, so nothing can swap the address in between (DNS rebinding).

Plain HTTP is parsed both ways (h11), request by request: a kept-alive or pipelining client connection
is served one request at a time, each checked, recorded and sent on a connection of its own to its own
host, so no request can ride on a connection opened for another. A connection belongs to the job that
was running when it was opened: `begin_job` closes every connection of the previous job, so nothing
Chromium keeps open (a TLS tunnel, a kept-alive socket) carries one job's traffic past the next job's
bookkeeping or through the previous job's upstream proxy.

Each browser context has a listener of its own (`open_listener`, the context's proxy): only the listener of
the context the job runs in, and the browser-wide one (the worker's own uploads), serve. A request a
context's earlier page still makes (a `keepalive` fetch sent as it unloaded, which Chromium sends again on a
new connection when `begin_job` closes its first one, and the redirects it follows) arrives on that
context's listener and is refused while another context's job runs: it can never leave through another
job's upstream proxy, nor count as another job's traffic. And once a job is over (`end_job`), its context's
listener serves no more until that context's next job begins: what its page asks for after its job (a beacon
sent as it is left, whose answer would set a cookie after the page's wipe) is refused too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from render.net.http1 import ClientConnection
from render.net.policy import NetworkPolicy
from render.net.traffic import JobTraffic, Refusal, Upstream

log = logging.getLogger(__name__)


class Listener:
    """One browser context's way out: a loopback port of the egress proxy (the context's proxy server)."""

    def __init__(self, proxy: EgressProxy) -> None:
        self._proxy = proxy
        self._server: asyncio.Server | None = None
        self.url = ""  # http://127.0.0.1:<port>, once opened (EgressProxy.open_listener)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(
            lambda reader, writer: self._proxy._serve(reader, writer, self), "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        """No new connection; those open end with their job (`begin_job`) or the proxy."""
        if self._server is not None:
            self._server.close()
            self._proxy._listeners.discard(self)


class EgressProxy:
    """An HTTP proxy on loopback that enforces the network policy for one worker's browser."""

    def __init__(self, policy: NetworkPolicy) -> None:
        self.policy = policy
        self._job = JobTraffic()
        self._server: asyncio.Server | None = None
        self._listeners: set[Listener] = set()  # the browser contexts' own (open_listener)
        self._serving: Listener | None = None  # the listener of the current job's context, besides the browser-wide one
        self.refused_elsewhere = 0  # connections refused on a context's listener outside its context's jobs
        # Open client connections and the listener each came through (None: the browser-wide one). asyncio holds a
        # connection's task only weakly: an idle one could be garbage-collected mid-await; held here until it ends.
        self._connections: dict[asyncio.Task[None], Listener | None] = {}

    @property
    def refusals(self) -> list[Refusal]:
        """Connections the current job's browser was refused."""
        return self._job.refusals

    @property
    def origins(self) -> set[str]:
        """Origins the current job's browser connected to."""
        return self._job.origins

    @property
    def upstream(self) -> Upstream | None:
        return self._job.upstream

    def begin_job(self, upstream: Upstream | None, listener: Listener | None = None) -> None:
        """A new job starts with its own upstream and bookkeeping, in the context whose `listener` is given;
        every connection still open from the previous job is closed (Chromium opens new ones, which this job
        then checks and records if they come through its context's listener, and refuses otherwise)."""
        for connection in list(self._connections):
            connection.cancel()
        self._job = JobTraffic(upstream)
        self._serving = listener

    def end_job(self) -> None:
        """The job is over: its context's listener serves no more (until the context's next job begins) and every
        connection opened through a context's listener is closed; the browser-wide one's (the worker's own
        uploads) go on."""
        self._serving = None
        for connection, listener in list(self._connections.items()):
            if listener is not None:
                connection.cancel()

    async def open_listener(self) -> Listener:
        """A listener for a new browser context (given as its proxy server), serving only that context's jobs."""
        listener = Listener(self)
        await listener._start()
        self._listeners.add(listener)
        return listener

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def close(self) -> None:
        for listener in list(self._listeners):
            await listener.close()
        if self._server is not None:
            self._server.close()
            for connection in list(self._connections):
                connection.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     listener: Listener | None = None) -> None:
        if listener is not None and listener is not self._serving:  # another context's job runs now
            self.refused_elsewhere += 1
            log.debug("egress: a connection on the listener of a context whose job is over was refused")
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        job = self._job
        self._connections[task] = listener
        task.add_done_callback(lambda done: self._connections.pop(done, None))
        try:
            await ClientConnection(self.policy, job, reader, writer).serve()
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("egress proxy failure")
        finally:
            writer.close()
