"""Jobs as the API makes them, for tests that offer or end jobs themselves."""

from __future__ import annotations

import time
from typing import Any

from render.contract.wire import Capture, JobRequest, Recorded, Waiting, WebhookOrder


def waiting_job(reference: str, organisation: str = "o", *, reply_channel: str = "results:test",
                deadline: float | None = None, options: dict[str, Any] | None = None) -> JobRequest:
    """A capture whose client waits on `reply_channel` until `deadline` (60 s from now)."""
    return JobRequest(reference=reference, organisation=organisation, trace_id="t",
                      work=Capture(options=options or {}),
                      answer=Waiting(reply_channel, time.time() + 60 if deadline is None else deadline))


def recorded_job(reference: str, organisation: str = "o", *, timeout: float = 60.0,
                 webhook: WebhookOrder | None = None, options: dict[str, Any] | None = None) -> JobRequest:
    """An async capture: nobody waits, its outcome is recorded."""
    return JobRequest(reference=reference, organisation=organisation, trace_id="t",
                      work=Capture(options=options or {}, store=True), answer=Recorded(timeout=timeout),
                      webhook=webhook)
