"""The egress proxy: every connection the browser makes goes through it (docs/security.md).

Chromium is started with `--proxy-server` pointing here and `--proxy-bypass-list=<-loopback>` (without
it Chromium would connect to loopback directly). For each CONNECT tunnel (HTTPS, WebSockets) and each
plain-HTTP request the proxy resolves the host itself, checks every answer against the policy, and
connects to the address it checked, so nothing can swap the address in between (DNS rebinding).

Plain HTTP is parsed both ways (h11), request by request: a kept-alive or pipelining client connection
is served one request at a time, each checked, recorded and sent on a connection of its own to its own
host, so no request can ride on a connection opened for another.

Each browser context has a listener of its own (`open_listener`, the context's proxy), and each listener's
traffic is one job's at a time (`traffic`: its upstream, the origins reached, the refusals), so jobs in
different contexts of one browser never share bookkeeping. A context's listener serves only while a job of
that context runs (`begin_job` to `end_job`); the browser-wide listener (the worker's own uploads) always
serves, with no upstream. A connection belongs to the job that was running when it was opened: `begin_job`
and `end_job` close every connection of their listener, so nothing Chromium keeps open (a TLS tunnel, a
kept-alive socket) carries one job's traffic past the next job's bookkeeping or through the previous job's
upstream proxy. A request a context's page still makes after its job (a `keepalive` fetch or a beacon sent
as it unloads, which Chromium sends again on a new connection when its first one is closed, and the
redirects it follows; an answer that would set a cookie after the page's wipe) is refused: it can never
leave through another job's upstream proxy, nor count as another job's traffic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from render.net.http1 import ClientConnection
from render.net.policy import NetworkPolicy
from render.net.traffic import JobTraffic, Upstream

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
            self._proxy._forget(self)


class EgressProxy:
    """An HTTP proxy on loopback that enforces the network policy for one worker's browser."""

    def __init__(self, policy: NetworkPolicy) -> None:
        self.policy = policy
        self._server: asyncio.Server | None = None
        self._listeners: set[Listener] = set()  # the browser contexts' own (open_listener)
        # Each listener's current or last job (None: the browser-wide listener, the worker's own traffic).
        self._jobs: dict[Listener | None, JobTraffic] = {None: JobTraffic()}
        self._serving: set[Listener] = set()  # the listeners of the contexts whose jobs run now
        self.refused_elsewhere = 0  # connections refused on a context's listener outside its context's jobs
        # Open client connections and the listener each came through (None: the browser-wide one). asyncio holds a
        # connection's task only weakly: an idle one could be garbage-collected mid-await; held here until it ends.
        self._connections: dict[asyncio.Task[None], Listener | None] = {}

    def traffic(self, listener: Listener | None = None) -> JobTraffic:
        """What the job through `listener` did so far (its context's current or last job; None: the browser-wide
        listener's): its upstream, the origins it connected to and the connections it was refused."""
        return self._jobs.get(listener) or JobTraffic()

    def begin_job(self, upstream: Upstream | None, listener: Listener | None = None) -> None:
        """A new job starts in the context whose `listener` is given (None: the browser-wide listener), with its
        own upstream and bookkeeping; every connection still open on that listener is closed (Chromium opens new
        ones, which this job then checks and records)."""
        self._close_connections(listener)
        self._jobs[listener] = JobTraffic(upstream)
        if listener is not None:
            self._serving.add(listener)

    def end_job(self, listener: Listener | None = None) -> None:
        """The job in `listener`'s context is over: that listener serves no more (until the context's next job
        begins) and every connection opened through it is closed. The browser-wide listener (None) goes on
        serving."""
        if listener is not None:
            self._serving.discard(listener)
            self._close_connections(listener)

    def _close_connections(self, listener: Listener | None) -> None:
        for connection, through in list(self._connections.items()):
            if through is listener:
                connection.cancel()

    def _forget(self, listener: Listener) -> None:
        self._listeners.discard(listener)
        self._serving.discard(listener)
        self._jobs.pop(listener, None)

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
        if listener is not None and listener not in self._serving:  # no job of its context runs now
            self.refused_elsewhere += 1
            log.debug("egress: a connection on the listener of a context whose job is over was refused")
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        job = self.traffic(listener)
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
