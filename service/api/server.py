"""The API program (`screenshot-service api`): the application served by uvicorn until SIGTERM."""

from __future__ import annotations

import signal
import sys

import uvicorn

from service.api.app import create_app
from service.settings import Settings


def serve(settings: Settings) -> None:
    """Serve the API on SCREENSHOT_HOST:SCREENSHOT_PORT; a SIGTERM drains the requests in flight, then exits 0."""
    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again against the handler it found: a
    # clean stop is exit 0, not 143 (the orchestrator reads the code).
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(0))
    uvicorn.run(create_app(settings), host=settings.service.host, port=settings.service.port,
                log_level="warning", access_log=False, loop="uvloop", http="httptools",
                timeout_graceful_shutdown=int(settings.service.result_wait_grace) + 90)
