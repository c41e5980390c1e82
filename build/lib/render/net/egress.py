"""The egress proxy: every connection the browser makes goes through it (README, Security).

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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from render.net.http1 import ClientConnection
from render.net.policy import NetworkPolicy
from render.net.traffic import JobTraffic, Refusal, Upstream

log = logging.getLogger(__name__)


class EgressProxy:
    """An HTTP proxy on loopback that enforces the network policy for one worker's browser."""

    def __init__(self, policy: NetworkPolicy) -> None:
        self.policy = policy
        self._job = JobTraffic()
        self._server: asyncio.Server | None = None
        # Open client connections and the job each belongs to. asyncio holds a connection's task only
        # weakly: an idle one could be garbage-collected mid-await; held here until it ends.
        self._connections: dict[asyncio.Task[None], JobTraffic] = {}

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

    def begin_job(self, upstream: Upstream | None) -> None:
        """A new job starts with its own upstream and bookkeeping; every connection still open from
        the previous job is closed (Chromium opens new ones, which this job then checks and records)."""
        for connection in list(self._connections):
            connection.cancel()
        self._job = JobTraffic(upstream)

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

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
        job = self._job
        self._connections[task] = job
        task.add_done_callback(lambda done: self._connections.pop(done, None))
        try:
            await ClientConnection(self.policy, job, reader, writer).serve()
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("egress proxy failure")
        finally:
            writer.close()
