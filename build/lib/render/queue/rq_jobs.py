"""The deliverer's RQ job functions, as every queued job names them by dotted path: here, where render's queue
code can name them without a string reaching into `service` (a rename there would otherwise break queued work
unseen). The deliverer registers what runs them when it starts (`screenshot-service webhooks`); anywhere else
they refuse to run.

Jobs queued before these names existed name the deliverer's own modules (deliver in its webhooks module, fire in
its monitoring module): those stay importable for one release (tests/unit/test_architecture.py checks both).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_handlers: dict[str, Callable[..., Any]] = {}


def register(**handlers: Callable[..., Any]) -> None:
    """What runs each job function in this process: `deliver=...`, `fire=...`."""
    _handlers.update(handlers)


def _handler(name: str) -> Callable[..., Any]:
    handler = _handlers.get(name)
    if handler is None:
        raise RuntimeError(f"{name} jobs run only inside `screenshot-service webhooks`")
    return handler


def deliver(payload: dict[str, Any]) -> Any:
    """One attempt at a webhook delivery (render.queue.deliveries enqueues it)."""
    return _handler("deliver")(payload)


def fire(monitor_id: str, due: int, revision: int, attempt: int = 0) -> Any:
    """A monitor's run due at `due` (scheduled on RQ's scheduling)."""
    return _handler("fire")(monitor_id, due, revision, attempt)
