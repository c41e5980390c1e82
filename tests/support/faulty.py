"""A TCP proxy that fails on demand, put between the service and a dependency (moto's S3 server): it passes the
traffic through, resets each connection, answers 503 as an S3 store does when it is overloaded, or stalls (takes
the request and never answers). `mode` may change while it runs; each connection is treated by the mode it met.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Literal

from tests.support.servers import free_port

Mode = Literal["pass", "reset", "503", "stall"]
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n"
        b"Connection: close\r\n\r\n%s")
BUSY_BODY = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")


class FaultyProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.mode: Mode = "pass"
        self.met: Counter[str] = Counter()  # connections by the mode they met
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._stalled: list[asyncio.StreamWriter] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        mode = self.mode
        self.met[mode] += 1
        if mode == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN
            writer.close()
            return
        if mode == "503":
            await reader.read(65536)
            writer.write(BUSY % (len(BUSY_BODY), BUSY_BODY))
            await writer.drain()
            writer.close()
            return
        if mode == "stall":
            self._stalled.append(writer)  # read what comes, answer nothing, keep the connection open
            while await reader.read(65536):
                pass
            return
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        await asyncio.gather(self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer))

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self._started.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            for writer in self._stalled:
                writer.close()
            self._loop.run_until_complete(server.wait_closed())
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*asyncio.all_tasks(self._loop), return_exceptions=True))

    @contextlib.contextmanager
    def running(self) -> Iterator[FaultyProxy]:
        thread = threading.Thread(target=self._run, name="faulty-proxy", daemon=True)
        thread.start()
        self._started.wait(10)
        try:
            yield self
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            thread.join(10)
            self._loop.close()
