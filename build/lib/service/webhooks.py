"""Kept for one release: deliveries queued before render.queue.rq_jobs named `deliver` by this module's path.
The deliveries are service.deliverer.webhooks; the deliverer program, service.deliverer.main."""

from __future__ import annotations

from service.deliverer.webhooks import deliver

__all__ = ["deliver"]
