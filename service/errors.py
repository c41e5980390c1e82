"""Errors raised by the API itself: credentials, signatures, limits, body size, overload."""

from __future__ import annotations

from render.contract.errors import ErrorDetail, ServiceError, TemporaryUnavailable
from render.queue.lanes import Offered

__all__ = ["TemporaryUnavailable"]
SHARE_RETRY_SECONDS = 5  # Retry-After of a job refused for its organisation's share of the queue


def over_share(offered: Offered, max_queue: int) -> TemporaryUnavailable:
    """The refusal of a job whose organisation already has its share of a full queue waiting."""
    error = TemporaryUnavailable(
        f"The queue is full ({max_queue} jobs waiting, SCREENSHOT_MAX_QUEUE) and your organisation already has "
        f"{offered.waiting} of them waiting, its share while others wait too ({offered.share}); retry after some "
        "of them are done (Retry-After), or send fewer at once.")
    error.retry_after = SHARE_RETRY_SECONDS
    error.reason = "queue_share"
    return error


def within(error: ServiceError, label: str, field: str) -> ServiceError:
    """`error` of a part of a request (a bulk entry, a compare side, a monitor's request): its message after
    `label` (`requests[2]: ...`, `before: ...`) and its fields under `field` (`requests.2.format`), or `field`
    itself when it names none."""
    error.message = f"{label}: {error.message}"
    error.args = (error.message,)
    error.details = [ErrorDetail(f"{field}.{detail.field}", detail.message)
                     for detail in error.details] or [ErrorDetail(field, error.code)]
    return error


class AccessKeyRequired(ServiceError):
    code = "access_key_required"
    status = 400


class AccessKeyInvalid(ServiceError):
    code = "access_key_invalid"
    status = 400


class SignatureRequired(ServiceError):
    code = "signature_is_required"
    status = 400


class SignatureNotValid(ServiceError):
    code = "signature_is_not_valid"
    status = 400


class ScreenshotsLimitReached(ServiceError):
    code = "screenshots_limit_reached"
    status = 400


class ConcurrencyLimitReached(ServiceError):
    code = "concurrency_limit_reached"
    status = 400


class RequestBodyTooLarge(ServiceError):
    code = "request_body_too_large"
    status = 413


class JobNotFound(ServiceError):
    """GET /jobs/{reference} for a job this organisation does not have (the spec has no not-found code)."""

    code = "request_not_valid"
    status = 404


class MonitorNotFound(ServiceError):
    """A monitor this organisation does not have."""

    code = "request_not_valid"
    status = 404


class RouteNotFound(ServiceError):
    """A path this API does not serve (the spec has no not-found code)."""

    code = "request_not_valid"
    status = 404


class MethodNotAllowed(ServiceError):
    """A served path asked with a method it does not take."""

    code = "request_not_valid"
    status = 405
